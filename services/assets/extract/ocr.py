"""Optical character recognition for PDF pages without a text layer, inside the sandboxed parser.

RapidOCR (PP-OCRv4 detection and recognition, Chinese and Latin script) runs on ONNX Runtime with the
models its wheel ships, so nothing is fetched at run time. It is loaded only when a file needs it: the
engine and its runtime need more address space than the other parsers (measured here: 1.26 GB peak
virtual memory for one 150 dpi page on one thread, 1.32 GB at 200 dpi), so the OCR path lifts the
sandbox's soft memory and CPU limits to the hard ones the parent set for it (`ocr_memory_bytes`,
`parse_cpu_seconds + ocr_seconds`). One thread: the machine's cores are shared by parallel extractions, and a
scanned file's pages by several parsers (services.assets.splitting).

OCR is bounded by a page count and a time budget; pages beyond either are reported, never silently
skipped. A page of dense body text costs about 3 CPU seconds (bench/ocr.py).
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Callable
from typing import Any

# Text lines per call of the recognition model (see Ocr._load).
_REC_BATCH = 1
# The longest side of the image the detection model sees (see Ocr._load).
_DETECT_SIDE = 1024
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
    for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        soft, hard = resource.getrlimit(which)
        if soft != hard:
            # Only up to the hard limit, which the parent chose for the OCR path; a process cannot go above it.
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (hard, hard))


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
            from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

            # The sandbox may start no thread (RLIMIT_NPROC 0 where it applies): OpenCV works sequentially,
            # and ONNX Runtime with one intra- and one inter-op thread runs on the calling thread.
            cv2.setNumThreads(0)

            # No angle classifier: scans are upright, and here it lost lines more often than it turned any.
            # One line per recognition call: in a batch every line is padded to the widest's length, and the
            # padding both costs time and makes the model drop the spaces between words (bench/ocr.py, six
            # pages of 11 pt text: words found 496 → 524 of 586 and recognition 3.1 → 1.9 s a page at 200 dpi).
            engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1, use_cls=False, rec_batch_num=_REC_BATCH)
            # Lines are found on the page scaled to 1024 pixels at most, and read from the page as rendered.
            # RapidOCR's own choice for a page rendered at 200 dpi is its whole 2,000 pixels, where the
            # detection model splits lines and misses small print (scanned pages of 8 to 16 pt text at 200 dpi:
            # words found 270 → 835 of 855 at 8 pt, 540 → 588 of 590 at 11 pt, 331 of 342 either way at 16 pt;
            # tests/service/assets/test_fidelity.py reads the 8 pt page) and takes five times as long (detection
            # 2.05 → 0.37 s a page of 11 pt text; bench/ocr.py). Its options cannot ask for this: with `limit_type: max` it picks the
            # side from the image's size again, so the detector's preprocessing is replaced here.
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
