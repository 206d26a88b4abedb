"""`python -m ttnn_eager.tools.zoo --worker [--bfloat16-cpu | --compile]`: the sweep's worker subprocess."""
import sys

from .worker import worker_main

if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"] and sys.argv[2:] in ([], ["--bfloat16-cpu"], ["--compile"]):
        sys.exit(worker_main(bfloat16_cpu=sys.argv[2:] == ["--bfloat16-cpu"], compiled=sys.argv[2:] == ["--compile"]))
    sys.exit("usage: ttnn-eager zoo (this module's own entry point is the worker: --worker)")
