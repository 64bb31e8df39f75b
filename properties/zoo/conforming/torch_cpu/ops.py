"""torch.softmax / log_softmax, F.rms_norm, F.layer_norm, torch.matmul and eager attention."""
from properties.zoo.conforming._attention import attention_functions
from properties.zoo.conforming._build import install
from properties.zoo.conforming._torch import OPS

install(globals(), "gpu_impl.ops", {**OPS, **attention_functions(OPS["attention"])})
