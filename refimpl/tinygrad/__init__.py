"""Importing real tinygrad 0.10.1 kernels into refimpl (tinygrad itself is needed only when these are called).

  importer.py  from_tinygrad(spec_or_uops) -> a verified refimpl Program; TranslationError; the translation rules
               (TRANSLATION_RULES)
  capture.py   capture(): record every kernel a tinygrad script runs (Program, inputs before, outputs after)
"""
from refimpl.tinygrad.capture import CapturedKernel, capture
from refimpl.tinygrad.importer import TRANSLATION_RULES, Translation, TranslationError, from_tinygrad, translate, translate_dtype

__all__ = ["TRANSLATION_RULES", "CapturedKernel", "Translation", "TranslationError", "capture", "from_tinygrad", "translate",
           "translate_dtype"]
