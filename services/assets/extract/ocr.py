"""Optical character recognition for PDF pages without a text layer, inside the sandboxed parser.

RapidOCR (PP-OCRv4 detection and recognition, Chinese and Latin script) finds and reads the lines, with the
models its wheel ships, so nothing is fetched at run time; OpenVINO runs the models (see `_Model`). It is
loaded only when a file needs it: the engine and its runtime need more address space and threads than the
other parsers, so the OCR path lifts the sandbox's soft memory, CPU and thread limits to the hard ones set
for it (`ocr_memory_bytes`, `parse_cpu_seconds + ocr_seconds`, a few threads; services.assets.parser). One
thread computes: the machine's cores are shared by parallel extractions, and a scanned file's pages by
several parsers (services.assets.splitting). Each line the recognition model reads is read again against an
English dictionary (services.assets.extract.lexicon), as Tesseract reads with its word lists.

OCR is bounded by a page count and a time budget; pages beyond either are reported, never silently
skipped. A page of dense body text costs about 1.4 CPU seconds here (bench/ocr.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

# Text lines per call of the recognition model (see Ocr._load).
_REC_BATCH = 1
# The longest side of the image the detection model sees (see Ocr._load).
_DETECT_SIDE = 1024
# A text line reaches the recognition model stretched to a multiple of this width (see _Model).
_LINE_WIDTH_STEP = 128
# Told once per process when OCR starts: the sandbox's parent then extends the parse's deadline by the
# OCR time budget (see services.assets.sandbox).
_started: list[Callable[[], None]] = []
# The engine, loaded once per process: the blocks of a split file and the reader that takes the rest over
# (services.assets.splitting) share it, as they share the process's address space limit.
_engine: list[Any] = []


def on_start(callback: Callable[[], None]) -> None:
    _started[:] = [callback]


def started() -> bool:
    """Whether this process has loaded the engine (and so lifted its soft limits to the hard ones)."""
    return bool(_engine)


def _lift_soft_limits() -> None:
    for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NPROC):
        soft, hard = resource.getrlimit(which)
        if soft != hard:
            # Only up to the hard limit, which the parent chose for the OCR path; a process cannot go above it.
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (hard, hard))


@functools.cache
def _openvino() -> Any:
    """OpenVINO's runtime (its `Core`), without the model converter that `import openvino` also loads.

    The converter starts OpenVINO's telemetry, which looks for a consent file in the home directory (the
    sandbox has none, and the import fails there); running a model needs neither. openvino's `__init__` skips
    the converter when it cannot be imported, which a `None` in `sys.modules` makes so.
    """
    sys.modules.setdefault("openvino.tools.ovc", None)  # type: ignore[arg-type]
    import openvino

    return openvino.Core()


def _stretched(batch: Any, width: int) -> Any:
    """Images in the models' layout (batch, channel, height, width) resized to `width`."""
    import cv2
    import numpy

    height = batch.shape[2]
    return numpy.stack([cv2.resize(image.transpose(1, 2, 0), (width, height)).transpose(2, 0, 1) for image in batch])


class _Model:
    """One of RapidOCR's models compiled by OpenVINO, called as RapidOCR calls its ONNX Runtime sessions.

    OpenVINO, not the ONNX Runtime that RapidOCR's wheel is built on: with one thread it computes the
    recognition model in bfloat16 where the processor has it (AVX-512 BF16 or AMX; asked for explicitly, as
    OpenVINO's own default elsewhere may be float16), in float32 elsewhere, as ONNX Runtime. The engine on one core took 3.24 → 1.35–1.44 s a page of 11 pt text
    here (recognition is most of it), with the same 1,730 of 1,732 words found (bench/ocr.py). Detection stays
    in float32, where bfloat16 lost a word.
    Compiling starts OpenVINO's own worker threads (two a model), hence the thread limit the OCR path lifts.
    They are not pinned to a core: OpenVINO pins by default, every process to the same first core, so two
    parsers reading a scan's pages at once took 2.87 s a page each, on one core between them (1.41 pinned off).

    OpenVINO prepares the model anew for every input shape it has not seen, and keeps what it prepared. Each
    text line has its own width, so the recognition model's inputs are stretched to the next multiple of
    `width_step` pixels: a few dozen shapes instead of one a line. Without that, a page cost 0.3–0.6 s more
    and the address space grew without bound (6.3 GB after ten pages); with it, 1.8 GB after six pages and
    2.3 GB after thirty (1.0 GB resident), and the words found on thirty pages were 8,658 against ONNX
    Runtime's 8,655 (padding with blank instead of stretching found 8,645).
    """

    def __init__(self, path: str, *, precision: str | None = None, width_step: int = 0):
        self.path = path
        self.precision = precision
        self.width_step = width_step
        self._request: Any = None
        self._model: Any = None

    def _read(self) -> Any:
        if self._model is None:
            self._model = _openvino().read_model(self.path)
        return self._model

    def __call__(self, inputs: Any) -> list[Any]:
        if self._request is None:
            core = _openvino()
            precision = self.precision or (
                "bf16" if "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"
            )
            config: dict[str, Any] = {
                "INFERENCE_NUM_THREADS": 1,
                "NUM_STREAMS": 1,
                "ENABLE_CPU_PINNING": False,
                "INFERENCE_PRECISION_HINT": precision,
            }
            self._request = core.compile_model(self._read(), "CPU", config).create_infer_request()
            # The compiled model holds what it needs; the model read from the file is not kept beside it.
            self._model = None
        if self.width_step and inputs.shape[-1] % self.width_step:
            inputs = _stretched(inputs, inputs.shape[-1] + self.width_step - inputs.shape[-1] % self.width_step)
        self._request.infer({0: inputs})
        # The output tensor is the request's own memory, written again by the next call.
        return [self._request.get_output_tensor(0).data.copy()]

    def have_key(self, key: str = "character") -> bool:
        return bool(self._read().has_rt_info(["framework", key]))

    def get_character_list(self, key: str = "character") -> list[str]:
        characters: str = self._read().get_rt_info(["framework", key]).astype(str)
        return characters.splitlines()


class Ocr:
    def __init__(self, *, max_pages: int, seconds: float, dpi: int):
        self.max_pages = max_pages
        self.seconds = seconds
        self.dpi = dpi
        self.pages = 0
        self.spent = 0.0

    def can_read(self) -> bool:
        return self.pages < self.max_pages and self.spent < self.seconds

    def _load(self) -> Any:
        if not _engine:
            for callback in _started:
                callback()
            _lift_soft_limits()
            # Numerical libraries start their thread pools at import unless told otherwise.
            for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(name, "1")
            import cv2
            from rapidocr_onnxruntime import RapidOCR
            from rapidocr_onnxruntime.ch_ppocr_cls import text_cls
            from rapidocr_onnxruntime.ch_ppocr_det import text_detect
            from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess
            from rapidocr_onnxruntime.ch_ppocr_rec import text_recognize
            from rapidocr_onnxruntime.ch_ppocr_rec.utils import CTCLabelDecode

            from services.assets.extract.lexicon import DictionaryDecode

            # OpenCV works on the calling thread.
            cv2.setNumThreads(0)

            # RapidOCR's stages build their model sessions by this module-level name; here they get OpenVINO
            # models (never compiled for the angle classifier, which is not used).
            stages = (text_detect, text_recognize, text_cls)
            sessions = [stage.OrtInferSession for stage in stages]
            text_detect.OrtInferSession = lambda config: _Model(config["model_path"], precision="f32")
            text_recognize.OrtInferSession = lambda config: _Model(config["model_path"], width_step=_LINE_WIDTH_STEP)
            text_cls.OrtInferSession = lambda config: _Model(config["model_path"])
            try:
                # No angle classifier: scans are upright, and here it lost lines more often than it turned any.
                # One line per recognition call: in a batch every line is padded to the widest's length, and
                # the padding both costs time and makes the model drop the spaces between words (bench/ocr.py,
                # six pages of 11 pt text: words found 496 → 524 of 586 and recognition 3.1 → 1.9 s a page).
                engine = RapidOCR(use_cls=False, rec_batch_num=_REC_BATCH)
            finally:
                for stage, session in zip(stages, sessions, strict=True):
                    stage.OrtInferSession = session
            if not (isinstance(engine.text_det.infer, _Model) and isinstance(engine.text_rec.session, _Model)):
                # A RapidOCR that builds its sessions otherwise would run ONNX Runtime on every core, unbounded.
                raise RuntimeError("RapidOCR did not take OpenVINO's models (its stages changed)")
            if not isinstance(engine.text_rec.postprocess_op, CTCLabelDecode):
                raise RuntimeError("RapidOCR's recognition no longer decodes with CTCLabelDecode (its stages changed)")
            # Each line read is read again against a dictionary (services.assets.extract.lexicon).
            engine.text_rec.postprocess_op = DictionaryDecode(engine.text_rec.postprocess_op)
            # Lines are found on the page scaled to 1024 pixels at most, and read from the page as rendered.
            # RapidOCR's own choice for a page rendered at 200 dpi is its whole 2,000 pixels, where the
            # detection model splits lines and misses small print (scanned pages of 8 to 16 pt text at 200 dpi:
            # words found 270 → 835 of 855 at 8 pt, 540 → 588 of 590 at 11 pt, 331 of 342 either way at 16 pt;
            # tests/service/assets/test_fidelity.py reads the 8 pt page) and takes five times as long (detection
            # 2.05 → 0.37 s a page of 11 pt text; bench/ocr.py). Its options cannot ask for this: with
            # `limit_type: max` it picks the side from the image's size again, so the detector's preprocessing
            # is replaced here.
            detector = engine.text_det
            preprocess = DetPreProcess(_DETECT_SIDE, "max", detector.mean, detector.std)
            detector.get_preprocess = lambda _longest: preprocess
            _engine.append(engine)
        return _engine[0]

    def read_page(self, page: Any, clip: Any = None) -> str:
        """The text lines OCR finds on a rendered page (or a clip of it), top to bottom."""
        engine = self._load()
        started = time.monotonic()
        try:
            from PIL import Image

            pixmap = page.get_pixmap(dpi=self.dpi, clip=clip, colorspace="rgb", alpha=False)
            # The rendered pixels as an image, not encoded to PNG for the engine to decode again (0.17 s a page).
            result, _ = engine(Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples))
        finally:
            self.pages += 1
            self.spent += time.monotonic() - started
        return "\n".join(str(line[1]) for line in result or [] if len(line) > 1)

    def summary(self) -> str:
        rate = self.pages / self.spent if self.spent > 0 else 0.0
        pages = "1 page was" if self.pages == 1 else f"{self.pages} pages were"
        return f"{pages} read by OCR ({self.spent:.1f} s, {rate:.2f} pages/s)"
