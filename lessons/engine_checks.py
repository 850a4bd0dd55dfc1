"""Why the engine lesson refuses a request, in numbers a learner can act on.

The engine (paged.engine.LLMEngine.add_request) is the authority: it accepts a request or raises ValueError with an
English message. When the refusal is an `AdmissionError` (paged.engine.admission) it already names the limit hit and
carries the numbers its fix needs ("raise num_blocks to 12", "at most 40 tokens in all"); `refusal` only turns it into
the page's RequestError, so the page can say what to change instead of "do what the message says". Any other refusal
keeps the code "rejected" and the engine's message. `check_form` refuses form values outside their ranges before
anything else.
"""

from __future__ import annotations

from paged.engine.admission import AdmissionError
from .engine_requests import BOUNDS, RequestError, RequestSpec

FORM_FIELDS = ("max_tokens", "temperature", "seed", "n")  # what the "Add a request" forms let a learner type
ENGINE_CODES = ("positions", "pool", "samples", "batch_tokens", "rejected")  # refusals by a configuration


def check_form(spec: RequestSpec) -> None:
    """Raise RequestError "out_of_range" (field, value, lo, hi) for a form field outside its BOUNDS: the page says
    so rather than quietly using another number."""
    for name in FORM_FIELDS:
        lo, hi = BOUNDS[name]
        value = getattr(spec, name)
        if not lo <= value <= hi:  # NaN fails too
            raise RequestError("out_of_range", f"{name} = {value} is outside its range {lo}–{hi}", field=name,
                               value=value, lo=lo, hi=hi)


def refusal(err: ValueError) -> RequestError:
    """The RequestError for a request the engine refused with `err`: an AdmissionError keeps its code and values
    (positions, pool, samples, batch_tokens: see paged.engine.admission.check_fits); anything else is "rejected"
    with the engine's message."""
    if isinstance(err, AdmissionError):
        return RequestError(err.code, str(err), **err.values)
    return RequestError("rejected", str(err))
