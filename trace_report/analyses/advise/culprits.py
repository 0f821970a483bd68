"""What advise's texts name as the thing to change in this trace: the DataLoader settings its
events show and the advice for the kind of CPU work the GPU waits on (``cpu_bound``)."""

from __future__ import annotations

CPU_WORK = {
    "op": "what the operator computes on the host (its library's algorithm search, a CPU fallback; trace-report "
          "ops, torch.backends.cudnn.benchmark for a cuDNN search), or move it out of the step",
    "runtime": "a runtime call that is not a launch (cudaFree/hipFree, cudaMalloc: the caching allocator giving "
               "memory back; no torch.cuda.empty_cache() in the loop, a steady batch shape, "
               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
    "python": "Python or other host code between the operators (py-spy, the CPU rows of the timeline): move "
              "preprocessing to a DataLoader or the GPU, torch.compile the loop",
}
"""What ``cpu_bound`` recommends by the kind of its biggest item (view ``launch_cpu_split_of``)."""


def loader_text(loader: dict) -> tuple[str, str]:
    """What the trace shows of the DataLoader (its iterator's record_function label: num_workers=0
    runs ``_SingleProcessDataLoaderIter``, more workers ``_MultiProcessingDataLoaderIter``; pinning
    records aten::pin_memory / aten::_pin_memory operators) as evidence, and the advice it implies."""
    name, pins = str(loader.get("loader") or ""), int(loader.get("pin_ops") or 0)
    seen = []
    if "_SingleProcessDataLoaderIter" in name:
        seen.append("_SingleProcessDataLoaderIter: num_workers=0, the main process loads every batch")
    elif "_MultiProcessingDataLoaderIter" in name:
        seen.append("_MultiProcessingDataLoaderIter: worker processes, yet the step waits for them")
    if name:
        seen.append(f"{pins} aten::pin_memory calls" if pins else "no aten::pin_memory call recorded")
    first = ("DataLoader(num_workers=4 or more, " if "_SingleProcess" in name else
             "More workers or prefetching: DataLoader(num_workers=more, prefetch_factor=4, " if "_Multi" in name else
             "Load ahead of the GPU: DataLoader(num_workers>0, ")
    pin = "pin_memory=True, " if not pins else ""
    return (f"; {'; '.join(seen)}" if seen else "",
            f"{first}{pin}persistent_workers=True); move decoding/augmentation to the workers or the GPU")
