// Result tensors of the ttnn device made in one C++ call (core/tensor.py: new_tensor), the hot path of every
// op's result: what Python did in four steps (a non-owning storage at a fake address, a TensorImpl on the
// device, set_ onto the storage, contiguous sizes and strides) at ~9.6 us, here ~1 us plus the ctypes call.
// Called through ctypes.PyDLL (the GIL held); Python sets the storage's Handle afterwards, as before.
#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>

#include <Python.h>

#include <vector>

// libtorch_python's wrapper of a Tensor into its Python object (declared here: its header pulls in pybind11).
PyObject* THPVariable_Wrap(const at::TensorBase& var);

#define API extern "C" __attribute__((visibility("default")))

// A contiguous tensor of `shape` (a tuple or torch.Size of ints) and `dtype` (a torch.dtype) on ttnn:`index`,
// whose storage is `nbytes` long at the fake device address `address` (nothing is allocated or freed).
API PyObject* ttnn_eager_new_tensor(PyObject* shape, PyObject* dtype, int index, long long address,
                                    long long nbytes) {
  try {
    Py_ssize_t ndim = PyTuple_Size(shape);
    if (ndim < 0) return nullptr;
    std::vector<int64_t> sizes(ndim);
    for (Py_ssize_t i = 0; i < ndim; ++i) {
      sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
      if (sizes[i] == -1 && PyErr_Occurred()) return nullptr;
    }
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    c10::Storage storage(c10::Storage::use_byte_size_t{}, static_cast<size_t>(nbytes),
                         c10::DataPtr(reinterpret_cast<void*>(address), device), nullptr, false);
    auto scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        c10::scalarTypeToTypeMeta(scalar_type));
    t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
    return THPVariable_Wrap(t);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}
