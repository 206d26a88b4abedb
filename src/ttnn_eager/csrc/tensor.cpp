// The two tensor-making steps on every op's path, as a CPython extension module (`_ttnn_eager_native`, loaded
// from the same library as hooks.cpp by core/native.py; METH_FASTCALL: no ctypes argument conversion):
//
//   new_tensor(shape, dtype, index, address, nbytes, handle)   a contiguous tensor of `shape` (a tuple or
//       torch.Size) and `dtype` on ttnn:`index`, on a storage `nbytes` long at the fake device address `address`
//       (non-owning: nothing is allocated or freed), the storage's Python object holding `handle` as
//       `_ttnn_handle` (core/tensor.py: new_tensor). What Python did in four steps (a storage, an empty
//       TensorImpl on the device, set_, the contiguous geometry, then the attribute) in one call.
//   alias(base, sizes, strides, offset)   a tensor on base's storage with that geometry (base given as its
//       `Tensor._cdata`, the TensorImpl's address, which the caller's reference keeps alive): what the
//       device-generic CPU kernel of as_strided does (at::native::as_strided_tensorimpl: the same storage and
//       dispatch keys, PyTorch's bounds check), without the Python dispatcher's boxed call around it
//       (core/dispatch.py: _aliases_of, for the results of view ops).
//
// Decisions stay in Python: these only make tensors.
#include <ATen/ops/as_strided_native.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>

#include <Python.h>

#include <vector>

// libtorch_python's wrappers into Python objects (declared here: their headers pull in pybind11, which makes
// the build ~30x slower): a Tensor's (the same object while the TensorImpl has one), a Storage's (created once
// per StorageImpl, then kept).
PyObject* THPVariable_Wrap(const at::TensorBase& var);
PyObject* THPStorage_Wrap(c10::Storage storage);

namespace {

PyObject* handle_name = nullptr;  // "_ttnn_handle", interned

bool int_list(PyObject* seq, std::vector<int64_t>& out) {
  PyObject* fast = PySequence_Fast(seq, "ttnn_eager: expected a sequence of ints");
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out.resize(n);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(items[i]);
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

PyObject* new_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "new_tensor(shape, dtype, index, address, nbytes, handle)");
    return nullptr;
  }
  try {
    std::vector<int64_t> sizes;
    if (!int_list(args[0], sizes)) return nullptr;
    if (!PyObject_TypeCheck(args[1], &THPDtypeType)) {
      PyErr_SetString(PyExc_TypeError, "new_tensor: dtype must be a torch.dtype");
      return nullptr;
    }
    long index = PyLong_AsLong(args[2]);
    long long address = PyLong_AsLongLong(args[3]);
    long long nbytes = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return nullptr;
    c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index));
    c10::Storage storage(c10::Storage::use_byte_size_t{}, static_cast<size_t>(nbytes),
                         c10::DataPtr(reinterpret_cast<void*>(address), device), nullptr, false);
    auto scalar_type = reinterpret_cast<THPDtype*>(args[1])->scalar_type;
    at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        c10::scalarTypeToTypeMeta(scalar_type));
    t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
    PyObject* s = THPStorage_Wrap(std::move(storage));
    if (!s) return nullptr;
    int failed = PyObject_SetAttr(s, handle_name, args[5]);
    Py_DECREF(s);
    if (failed) return nullptr;
    return THPVariable_Wrap(t);
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* alias(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "alias(base._cdata, sizes, strides, offset)");
    return nullptr;
  }
  try {
    std::vector<int64_t> sizes, strides;
    if (!int_list(args[1], sizes) || !int_list(args[2], strides)) return nullptr;
    long long offset = PyLong_AsLongLong(args[3]);
    void* impl = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred()) return nullptr;
    at::Tensor base(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(static_cast<c10::TensorImpl*>(impl)));
    return THPVariable_Wrap(at::native::as_strided_tensorimpl(base, sizes, strides, offset));
  } catch (const c10::Error& e) {  // PyTorch's own message (the bounds check), as PyTorch raises it
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef methods[] = {
    {"new_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(new_tensor)), METH_FASTCALL,
     "a new contiguous ttnn tensor on a non-owning storage holding a Handle"},
    {"alias", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(alias)), METH_FASTCALL,
     "a tensor on base's storage with the given sizes, strides and storage offset"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ttnn_eager_native", nullptr, -1, methods};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__ttnn_eager_native() {
  handle_name = PyUnicode_InternFromString("_ttnn_handle");
  if (!handle_name) return nullptr;
  return PyModule_Create(&module);
}
