"""The caller's arrays on their way into the compiled module, and the module's results on their way back.

Accepted: numpy arrays (bf16 through ml_dtypes), torch tensors on the host or a CUDA device, and anything with
DLPack. Nothing is converted: a wrong dtype, rank or stride is a ValueError naming the tensor (the compiled module
checks those), and the data the module reads is the caller's own memory."""
import numpy as np

try:
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bf16 numpy arrays need ml_dtypes; torch's bf16 needs nothing
    ml_dtypes = None
    _BF16 = None


def _torch():
    import sys

    return sys.modules.get("torch")  # only ever set when the caller uses torch: never imported here


def is_torch(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def is_cuda(x) -> bool:
    return is_torch(x) and x.is_cuda


def for_module(x, name: str):
    """`x` as the compiled module takes it, without a copy: an ml_dtypes bf16 numpy array as its uint16 view (the
    module reads uint16 as bf16 bit patterns), a torch tensor detached from autograd."""
    if isinstance(x, np.ndarray):
        if _BF16 is not None and x.dtype == _BF16:
            return x.view(np.uint16)
        if x.dtype == np.uint16:
            raise ValueError(f"{name}: dtype uint16 is not accepted: float64, float32, bfloat16 or float16 "
                             "(bf16 numpy arrays have ml_dtypes.bfloat16)")
        return x
    if is_torch(x):
        if x.dtype == _torch().uint16:
            raise ValueError(f"{name}: dtype torch.uint16 is not accepted: float64, float32, bfloat16 or float16")
        return x.detach()
    if hasattr(x, "__dlpack__"):
        return x
    raise ValueError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def on_host(x, name: str):
    """for_module(x), first copied to the host when it is on a CUDA device (for work that reads it on the host)."""
    if is_cuda(x):
        x = x.detach().cpu()
    return for_module(x, name)


def synchronize_cuda(values):
    """Waits for the work queued on the current stream of the CUDA tensors' devices: the module's kernels run on the
    default stream and must see what the caller's stream wrote."""
    torch = _torch()
    for device in {value.device for value in values if is_cuda(value)}:
        torch.cuda.current_stream(device).synchronize()


def like(array: np.ndarray, example):
    """A result (a numpy array the module made) as the kind of `example`: numpy stays numpy; for torch, a tensor
    sharing the array's memory, moved to `example`'s device when that is not the host."""
    if is_torch(example):
        tensor = _torch().from_numpy(array)
        return tensor if example.device.type == "cpu" else tensor.to(example.device)
    return array


def view_info(x, name: str = "x"):
    """What the compiled module sees of a float tensor: (data address, dtype, shape, strides in elements). Its
    address is the caller's own (nothing was copied)."""
    from . import _core

    return _core.view_info(for_module(x, name), name)


def bf16_array(bits: np.ndarray) -> np.ndarray:
    """uint16 bf16 bit patterns as an ml_dtypes bf16 array (the same memory); the bits as they are without ml_dtypes."""
    return bits.view(_BF16) if _BF16 is not None else bits
