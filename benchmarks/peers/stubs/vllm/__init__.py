"""Stand-in for vLLM in the HippoRAG 2 peer environment (no GPU, and vLLM 0.6.6 pins torch 2.5.1).

``hipporag.llm.vllm_offline`` imports ``SamplingParams`` and ``LLM`` at module load, and ``HippoRAG.py``
imports that module unconditionally; only the offline OpenIE path (``openie_mode="offline"``) uses them.
The cross-check runs ``openie_mode="online"`` with an existing OpenIE file, so any use is a bug: both raise.
"""


class _Unavailable:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("vLLM is not installed in the peer environment (benchmarks/peers/stubs/vllm): "
                           "the HippoRAG 2 cross-check must not reach upstream's offline vLLM path")


class SamplingParams(_Unavailable):
    pass


class LLM(_Unavailable):
    pass
