"""One module per chapter: its experiments, typed results and the ``render_*`` functions its panels call.

A notebook imports its lesson (``from kvlab.lessons import decode as lesson``) and holds only prose,
calls into the lesson, asserts and panels. Plot builders live in ``kvlab.viz``; measurement helpers
shared with ``python -m kvlab.bench`` live in ``kvlab.measure``.

| chapter | notebook | lesson module |
|---|---|---|
| 3.1 | ``01_autoregressive_decode`` | ``decode`` |
| 3.2 | ``02_cache_storage_shape`` | ``storage`` |
| 3.3 | ``03_prefill_and_decode`` | ``prefill_decode`` |
| 3.4 | ``04_llama7b_memory_estimate`` | ``memory_estimate`` |
| 3.5 | ``05_misconceptions`` | ``misconceptions`` |
"""
