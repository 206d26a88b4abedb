

# ------------------------------------------------------------------------------------------------ log2, log10
def test_log2_log10_match_the_cpu():
    """log2 (torchvision detection's LevelMapper: the FPN level of each box) and log10, on the device."""
    x = torch.rand(3, 40) * 100 + 0.01
    for f in (torch.log2, torch.log10):
        with ttnn_eager.strict():
            out = f(x.to(DEV))
        _close(out, f(x), pearson=0.9999, rel=0.005)
    powers = torch.tensor([1.0, 2.0, 4.0, 1024.0, 0.25])  # exact where the CPU is exact
    with ttnn_eager.strict():
        assert torch.equal(torch.log2(powers.to(DEV)).cpu(), torch.log2(powers))
    i = torch.arange(1, 9)
    with ttnn_eager.strict():
        out = torch.log2(i.to(DEV))
    assert out.dtype == torch.float32
    _close(out, torch.log2(i), rel=0.01)
