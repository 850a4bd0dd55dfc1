"""Later chapters' data and math (window, swap, speculative, beam selection, memory, vLLM twin)."""
