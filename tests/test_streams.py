"""torch.ttnn.Stream / Event (features/streams.py): torch.cuda's stream API on the ttnn device."""
import time

import pytest
import torch


def test_stream_is_a_torch_stream_and_the_current_one_inside_with():
    s = torch.ttnn.Stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("ttnn:0") and s.stream_id == 0
    assert torch.ttnn.current_stream() == torch.ttnn.default_stream()
    with s:
        assert torch.ttnn.current_stream() is s
        with torch.ttnn.stream(None):  # FSDP2 passes None: no change
            assert torch.ttnn.current_stream() is s
    assert torch.ttnn.current_stream() is not s
    with torch.ttnn.stream(s):
        assert torch.ttnn.current_stream() is s
    s.wait_stream(torch.ttnn.default_stream())
    assert s.query() is True
    s.synchronize()


def test_events_record_wait_synchronize_and_time():
    x = torch.randn(64, 64).to("ttnn:0")
    start, end = torch.ttnn.Event(enable_timing=True), torch.ttnn.Event(enable_timing=True)
    assert isinstance(start, torch.Event) and not start.query()
    start.record()
    y = x @ x
    time.sleep(0.02)
    end.record()
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert 20 <= ms < 10_000
    torch.ttnn.current_stream().wait_event(end)
    torch.accelerator.current_stream().wait_event(end)  # a C++-typed caller (FSDP2) accepts it
    end.wait()
    assert torch.allclose(y.cpu(), (x.cpu() @ x.cpu()), atol=1, rtol=0.05)
    ev = torch.ttnn.current_stream().record_event()
    assert ev.query()
    with pytest.raises(RuntimeError, match="enable_timing"):
        torch.ttnn.Event().elapsed_time(end)
