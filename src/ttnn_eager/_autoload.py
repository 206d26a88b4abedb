"""Entry point of PyTorch's device-backend autoload (group `torch.backends`): `import torch` calls
`autoload()`, which imports the package (its root registers the `ttnn` device). Set
TORCH_DEVICE_BACKEND_AUTOLOAD=0 to switch it off."""


def autoload() -> None:
    import ttnn_eager  # noqa: F401
