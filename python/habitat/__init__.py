"""Habitat: forecast how long a PyTorch training step takes on GPUs you do not have."""
from __future__ import annotations

__version__ = "0.1.0"

import torch  # noqa: F401  (loads libc10/libtorch, which habitat._C links against)

from habitat import _engine  # noqa: F401,E402
from habitat import _C  # noqa: F401,E402
from habitat.data.devices import Device, devices, get_device, load_devices  # noqa: E402,F401
from habitat.data.forecast import Forecast  # noqa: E402,F401
from habitat.capture.predict import predict_on  # noqa: E402,F401
from habitat.present.tensorboard import TensorBoardLogger  # noqa: E402,F401
from habitat.present.report import write_report  # noqa: E402,F401
from habitat.analysis.memory import estimate_step_memory  # noqa: E402,F401
from habitat.capture.cupti import cupti_available  # noqa: E402,F401
from habitat.capture import compile as _compile  # noqa: E402,F401  (registers backend="habitat")
