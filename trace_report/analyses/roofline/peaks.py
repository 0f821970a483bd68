"""Peak throughput per GPU for rooflines, each figure with the NVIDIA or AMD document it comes from.

Units: FLOP/s (``*_flop_per_s``, integer tensor: OP/s) and byte/s (``dram_bytes_per_s``).
Tensor figures are *dense* (NVIDIA datasheets print sparse figures with an asterisk; those are
halved here). ``fp16_tensor`` is FP16/BF16 inputs with FP32 accumulation, the mode PyTorch
uses; on GeForce cards that is half the FP16-accumulate rate. ``None`` = not published / not
supported. Where a datasheet omits a figure, the note says how it follows from the
architecture whitepaper (e.g. GA10x FP64 = 1/64 of FP32).

AMD Instinct: ``*_tensor`` is the Matrix Core figure, the plain FP64/FP32 figures are the vector
ones. An MI250/MI250X package holds two GCDs that ROCm (and a trace) shows as two devices, so
their rows are one GCD: the datasheet's package figures halved.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from trace_report.errors import InputError, UsageError

T = 1e12
G = 1e9

A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
GA100_WHITEPAPER = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
                    "nvidia-ampere-architecture-whitepaper.pdf")
H100_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
H100_WHITEPAPER = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
V100_DATASHEET = ("https://images.nvidia.com/content/technologies/volta/pdf/"
                  "volta-v100-datasheet-update-us-1165301-r5.pdf")
V100_WHITEPAPER = "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf"
A40_DATASHEET = "https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf"
A10_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/"
                 "datasheet-new/nvidia-a10-datasheet.pdf")
T4_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
                "t4-tensor-core-datasheet-951643.pdf")
L4_DATASHEET = "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
GA102_WHITEPAPER = "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
RTX3060_PAGE = "https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/"
ADA_WHITEPAPER = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
TURING_WHITEPAPER = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
                     "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf")
MI200_DATASHEET = "https://www.amd.com/system/files/documents/amd-instinct-mi200-datasheet.pdf"
MI300X_DATASHEET = ("https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/"
                    "amd-instinct-mi300x-data-sheet.pdf")


@dataclass(frozen=True)
class GpuPeaks:
    """Peaks of one GPU (FLOP/s, byte/s), the pattern that recognises its device name, and
    the sources of the figures."""

    key: str
    name: str
    pattern: str
    fp64_flop_per_s: float | None
    fp32_flop_per_s: float | None
    dram_bytes_per_s: float | None
    sources: tuple[str, ...]
    fp64_tensor_flop_per_s: float | None = None
    fp16_flop_per_s: float | None = None
    tf32_tensor_flop_per_s: float | None = None
    fp16_tensor_flop_per_s: float | None = None
    int8_tensor_op_per_s: float | None = None
    note: str = ""

    def as_row(self) -> dict[str, object]:
        """A flat dict (sources joined by spaces) for tables and DataFrames."""
        row = asdict(self)
        row["sources"] = " ".join(self.sources)
        row.pop("pattern")
        return row


def _mi250_gcd(key: str, name: str, pattern: str, vector_t: float, matrix_t: float, fp16_t: float) -> GpuPeaks:
    """One GCD of an MI250 or MI250X: the MI200 datasheet's package figures (TFLOP/s) halved."""
    return GpuPeaks(key, name, pattern, vector_t / 2 * T, vector_t / 2 * T, 3276.8 / 2 * G, (MI200_DATASHEET,),
                    fp64_tensor_flop_per_s=matrix_t / 2 * T, fp16_tensor_flop_per_s=fp16_t / 2 * T,
                    int8_tensor_op_per_s=fp16_t / 2 * T,
                    note=f"one of the two GCDs (a device in ROCm): datasheet package figures halved (FP64/FP32 "
                         f"vector {vector_t} TFLOP/s, FP64 matrix {matrix_t}, FP16/BF16 and INT8 matrix {fp16_t}, "
                         f"HBM2e 3.2768 TB/s); no TF32")


def _a100(key: str, name: str, pattern: str, bw_gb: float) -> GpuPeaks:
    return GpuPeaks(key, name, pattern, 9.7 * T, 19.5 * T, bw_gb * G, (A100_DATASHEET, GA100_WHITEPAPER),
                    fp64_tensor_flop_per_s=19.5 * T, fp16_flop_per_s=78 * T, tf32_tensor_flop_per_s=156 * T,
                    fp16_tensor_flop_per_s=312 * T, int8_tensor_op_per_s=624 * T,
                    note="datasheet; FP16 non-tensor 78 TFLOP/s from the GA100 whitepaper, table 1")


PEAKS: tuple[GpuPeaks, ...] = (
    _a100("a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB", r"a100(?!.*80gb)(?!.*pcie)", 1555),
    _a100("a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", r"a100(?=.*80gb)(?!.*pcie)", 2039),
    _a100("a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", r"a100(?!.*80gb)(?=.*pcie)", 1555),
    _a100("a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", r"a100(?=.*80gb)(?=.*pcie)", 1935),
    GpuPeaks("h100-sxm", "NVIDIA H100 SXM5 80GB", r"h100(?!.*pcie)(?!.*nvl)", 34 * T, 67 * T, 3350 * G,
             (H100_DATASHEET, H100_WHITEPAPER), fp64_tensor_flop_per_s=67 * T, fp16_flop_per_s=133.8 * T,
             tf32_tensor_flop_per_s=494.5 * T, fp16_tensor_flop_per_s=989.5 * T, int8_tensor_op_per_s=1979 * T,
             note="datasheet sparse tensor figures halved; FP16 non-tensor from the Hopper whitepaper, table 3"),
    GpuPeaks("h100-pcie", "NVIDIA H100 PCIe 80GB", r"h100(?=.*pcie)", 26 * T, 51 * T, 2000 * G, (H100_DATASHEET,),
             fp64_tensor_flop_per_s=51 * T, tf32_tensor_flop_per_s=378 * T, fp16_tensor_flop_per_s=756.5 * T,
             int8_tensor_op_per_s=1513 * T, note="datasheet sparse tensor figures halved"),
    GpuPeaks("h200", "NVIDIA H200 SXM 141GB", r"h200", 34 * T, 67 * T, 4800 * G, (H200_PAGE,),
             fp64_tensor_flop_per_s=67 * T, tf32_tensor_flop_per_s=494.5 * T, fp16_tensor_flop_per_s=989.5 * T,
             int8_tensor_op_per_s=1979 * T, note="product page specifications, sparse tensor figures halved"),
    GpuPeaks("v100s-pcie", "NVIDIA V100S PCIe 32GB", r"v100s", 8.2 * T, 16.4 * T, 1134 * G, (V100_DATASHEET,),
             fp16_tensor_flop_per_s=130 * T),
    GpuPeaks("v100-pcie", "NVIDIA V100 PCIe", r"v100(?!s)(?=.*pcie)", 7 * T, 14 * T, 900 * G, (V100_DATASHEET,),
             fp16_tensor_flop_per_s=112 * T),
    GpuPeaks("v100-sxm2", "NVIDIA V100 SXM2", r"v100(?!s)(?!.*pcie)", 7.8 * T, 15.7 * T, 900 * G,
             (V100_DATASHEET, V100_WHITEPAPER), fp16_flop_per_s=31.4 * T, fp16_tensor_flop_per_s=125 * T,
             note="also used for V100-DGXS (DGX Station); FP16 non-tensor from the Volta whitepaper, table 1"),
    GpuPeaks("a40", "NVIDIA A40", r"\ba40\b", 37.4 * T / 64, 37.4 * T, 696 * G, (A40_DATASHEET, GA102_WHITEPAPER),
             fp16_flop_per_s=37.4 * T, tf32_tensor_flop_per_s=74.8 * T, fp16_tensor_flop_per_s=149.7 * T,
             int8_tensor_op_per_s=299.3 * T,
             note="datasheet (sparse figures halved); FP64 = FP32/64 and FP16 non-tensor = FP32 on GA10x "
                  "(GA102 whitepaper)"),
    GpuPeaks("a10", "NVIDIA A10", r"\ba10\b", 31.2 * T / 64, 31.2 * T, 600 * G, (A10_DATASHEET, GA102_WHITEPAPER),
             fp16_flop_per_s=31.2 * T, tf32_tensor_flop_per_s=62.5 * T, fp16_tensor_flop_per_s=125 * T,
             int8_tensor_op_per_s=250 * T,
             note="datasheet (sparse figures halved); FP64 = FP32/64 on GA10x (GA102 whitepaper)"),
    GpuPeaks("t4", "NVIDIA T4", r"\bt4\b", 8.1 * T / 32, 8.1 * T, 320 * G, (T4_DATASHEET, TURING_WHITEPAPER),
             fp16_tensor_flop_per_s=65 * T, int8_tensor_op_per_s=130 * T,
             note="datasheet; FP64 = FP32/32 on TU10x (Turing whitepaper)"),
    GpuPeaks("l4", "NVIDIA L4", r"\bl4\b", 30.3 * T / 64, 30.3 * T, 300 * G, (L4_DATASHEET, ADA_WHITEPAPER),
             fp16_flop_per_s=30.3 * T, tf32_tensor_flop_per_s=60 * T, fp16_tensor_flop_per_s=121 * T,
             int8_tensor_op_per_s=242.5 * T,
             note="datasheet (sparse figures halved); FP64 = FP32/64 and FP16 non-tensor = FP32 on AD10x "
                  "(Ada whitepaper)"),
    GpuPeaks("rtx3060", "NVIDIA GeForce RTX 3060 12GB", r"rtx\s*3060(?!\s*ti)", 12.74 * T / 64, 12.74 * T, 360 * G,
             (RTX3060_PAGE, GA102_WHITEPAPER), fp16_flop_per_s=12.74 * T, tf32_tensor_flop_per_s=12.74 * T,
             fp16_tensor_flop_per_s=25.5 * T, int8_tensor_op_per_s=101.9 * T,
             note="3584 CUDA cores x 1.777 GHz boost x 2 = 12.74 TFLOP/s FP32, 15 Gbps x 192 bit = 360 GB/s "
                  "(product page); per-SM tensor rates of GA10x GeForce from the GA102 whitepaper appendix "
                  "(28 SMs: FP16 with FP32 accumulate = 2x FP32, TF32 = FP32, INT8 = 8x FP32)"),
    GpuPeaks("rtx4090", "NVIDIA GeForce RTX 4090", r"rtx\s*4090", 1.29 * T, 82.6 * T, 1008 * G, (ADA_WHITEPAPER,),
             fp16_flop_per_s=82.6 * T, tf32_tensor_flop_per_s=82.6 * T, fp16_tensor_flop_per_s=165.2 * T,
             int8_tensor_op_per_s=660.6 * T, note="Ada whitepaper appendix, table 2 (dense figures)"),
    _mi250_gcd("mi250x-gcd", "AMD Instinct MI250X (one GCD)", r"mi250x", 47.9, 95.7, 383.0),
    _mi250_gcd("mi250-gcd", "AMD Instinct MI250 (one GCD)", r"mi250(?!x)", 45.3, 90.5, 362.1),
    GpuPeaks("mi300x", "AMD Instinct MI300X", r"mi300x", 81.7 * T, 163.4 * T, 5300 * G, (MI300X_DATASHEET,),
             fp64_tensor_flop_per_s=163.4 * T, tf32_tensor_flop_per_s=653.7 * T, fp16_tensor_flop_per_s=1307.4 * T,
             int8_tensor_op_per_s=2614.9 * T,
             note="datasheet dense figures (sparsity doubles the matrix ones); also used for the MI300X VF "
                  "(SR-IOV virtual function)"),
)
"""The peak table. Every figure's source is in ``sources`` (and ``note`` for derived ones)."""


def peaks_table() -> list[dict[str, object]]:
    """All rows of :data:`PEAKS` as flat dicts (for ``docs/roofline.md`` and ``--gpu list``)."""
    return [p.as_row() for p in PEAKS]


def _norm(text: str) -> str:
    return re.sub(r"[-_]", " ", text.lower())


def match_gpu(device_name: str | None) -> GpuPeaks | None:
    """The table row for a device name as a report or trace records it
    (``NVIDIA A100 80GB PCIe``, ``Tesla V100-SXM2-32GB``...), or for a table key
    (``a100-sxm4-80gb``); None when no row matches."""
    if not device_name:
        return None
    for peaks in PEAKS:
        if device_name.strip().lower() == peaks.key:
            return peaks
    norm = _norm(device_name)
    for peaks in PEAKS:
        if re.search(peaks.pattern, norm):
            return peaks
    return None


AMD_BY_PROPERTIES = {(9, 0, 104): "mi250-gcd", (9, 0, 110): "mi250x-gcd", (9, 4, 304): "mi300x"}
"""ROCm device properties (``computeMajor``, ``computeMinor``, ``numSms``: compute units) to a
table row, for traces that name the device only ``AMD Radeon Graphics``: gfx90a with 104 CUs is
one MI250 GCD (an MI210 has the same CUs, clocks and HBM2e bandwidth: the same peaks within 0.3%),
with 110 CUs one MI250X GCD; gfx942 with 304 CUs an MI300X."""


def match_amd_properties(props: dict[str, object]) -> GpuPeaks | None:
    """The row of an AMD device from a trace's ``deviceProperties`` entry
    (:data:`AMD_BY_PROPERTIES`), None when the name is not AMD's or the properties fit no row."""
    if "amd" not in str(props.get("name", "")).lower():
        return None
    try:
        key = AMD_BY_PROPERTIES.get((int(str(props["computeMajor"])), int(str(props["computeMinor"])),
                                     int(str(props["numSms"]))))
    except (KeyError, TypeError, ValueError):
        return None
    return next((p for p in PEAKS if p.key == key), None)


def choose_gpu(gpu: str) -> GpuPeaks | None:
    """The table row a user names with ``--gpu``: a key, or words that only one row's key or
    name holds (``a100 pcie 80gb``, ``NVIDIA A100 80GB PCIe``), else the row whose device-name
    pattern matches. Raises :class:`UsageError` when the words fit several rows (``a100``),
    listing them."""
    text = gpu.strip().lower()
    for peaks in PEAKS:
        if text == peaks.key:
            return peaks
    words = [w for w in re.split(r"[\s_-]+", text) if w and w != "nvidia"]
    fits = [p for p in PEAKS if words and all(w in f"{_norm(p.key)} {_norm(p.name)}".split() for w in words)]
    if len(fits) > 1:
        choices = ", ".join(f"{p.key} ({p.name})" for p in fits)
        raise UsageError(f"--gpu {gpu!r} fits {len(fits)} GPUs: {choices}; give one of these keys")
    return fits[0] if fits else match_gpu(gpu)


def resolve_peaks(device_name: str | None, *, gpu: str | None = None, peak_flops: float | None = None,
                  peak_bw: float | None = None) -> GpuPeaks | None:
    """Peaks for a roofline: ``gpu`` (a key or device name) overrides the recorded device;
    ``peak_flops`` (FLOP/s, used for every precision) and ``peak_bw`` (byte/s) override the
    table. Raises :class:`InputError` for a ``gpu`` the table does not know, :class:`UsageError`
    for one that fits several rows."""
    peaks = choose_gpu(gpu) if gpu else match_gpu(device_name)
    if gpu and peaks is None:
        keys = ", ".join(p.key for p in PEAKS)
        raise InputError(f"unknown GPU {gpu!r}; known: {keys} (or give --peak-flops and --peak-bw)")
    if peaks is None and peak_flops is None and peak_bw is None:
        return None
    if peaks is None:
        peaks = GpuPeaks("custom", "custom", "", None, None, None, ("user-supplied",))
    if peak_bw is not None:
        peaks = replace(peaks, dram_bytes_per_s=peak_bw, sources=(*peaks.sources, "user-supplied --peak-bw"))
    if peak_flops is not None:
        peaks = replace(peaks, key=peaks.key, sources=(*peaks.sources, "user-supplied --peak-flops"))
    return peaks


_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def parse_si(text: str | None, what: str) -> float | None:
    """A peak as the command line gives it: ``'19.5T'`` -> 1.95e13, ``'1555e9'`` -> 1.555e12 (an
    SI prefix k, M, G, T, P and a unit FLOP/s or B/s may follow); None stays None. Raises
    :class:`InputError` naming the option ``what`` for text that is no positive number."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([kKMGTP]?)\s*(?:FLOP/s|B/s|flop/s|b/s)?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise InputError(f"{what}: expected a positive number such as 19.5T or 1.555e12, got {text!r}")
    return float(m.group(1)) * _SI[m.group(2)]
