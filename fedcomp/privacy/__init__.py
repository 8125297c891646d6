"""Client-level differential privacy: clipped uploads, Gaussian noise, an accountant.

:func:`private` wraps an algorithm whose upload is a model or an update (DP-FedAvg of
McMahan et al., ICLR 2018): every participant's change is clipped to L2 norm ``C`` and
Gaussian noise ``N(0, (σC)²)`` is added to the sum of the clipped uploads at the server
(or, with ``local=True``, by every client to its own). :func:`epsilon` counts what the
rounds spend with Google's ``dp-accounting`` (``pip install 'fedcomp[privacy]'``), and
:func:`calibrate_noise` finds the ``σ`` of a target ``ε``. See ``docs/privacy.md``.
"""

from ..algorithms._private import PRIVATE_UPLOADS, REFUSED, clip_uploads, private, private_fields
from ._accounting import (
    ACCOUNTANTS,
    CALIBRATION_RTOL,
    SAMPLINGS,
    calibrate_noise,
    dp_event,
    epsilon,
)
from ._plan import DEFAULT_DELTA, PRIVACY_KEYS, PrivacyPlan, privacy_plan

__all__ = ["ACCOUNTANTS", "CALIBRATION_RTOL", "DEFAULT_DELTA", "PRIVACY_KEYS", "PRIVATE_UPLOADS",
           "REFUSED", "SAMPLINGS", "PrivacyPlan", "calibrate_noise", "clip_uploads", "dp_event",
           "epsilon", "private", "private_fields", "privacy_plan"]
