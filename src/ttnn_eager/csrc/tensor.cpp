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
//   handle(x)   core/tensor.py's maybe_handle for the common cases, without a Python frame: None for an object
//       that is not a tensor or a tensor not on a ttnn device; for a plain tensor (torch.Tensor, nn.Parameter) on
//       one, the storage's `_ttnn_handle` when x has its geometry (x.dtype is the Handle's dtype, offset 0, its
//       shape, contiguous), else the `_ttnn_views` entry of x's key (sizes, strides, offset, dtype: tensor.py's
//       _key). Every other case -- a subclass, symbolic sizes, no storage handle, a view not seen yet (derived
//       in Python), another dtype -- is the Python function given to set_slow(fn), called with x.
//   has_empty(args)   core/dispatch.py's _has_empty: a tensor on a ttnn device with no elements among args, or
//       in a list or tuple among them (not one of ints: sizes, dims); a subclass or symbolic sizes: the Python
//       function given to set_slow_empty(fn), called with args.
//   view(kind, args, h)   the alias a common view op makes of args[0] (kind: 0 view/_unsafe_view, 1 transpose,
//       2 permute, 3 unsqueeze, 4 expand, 5 slice, 6 select, 7 t), its geometry computed as core/dispatch.py's
//       _g_* functions compute it, made by as_strided_tensorimpl, with the view Handle h stored under its key
//       in the storage's `_ttnn_views` (tensor.py's add_view); None where those return None, or for an
//       argument form they do not take (a subclass, symbolic sizes, SymInts): the caller's Python way then.
//
// Decisions stay in Python: these only make tensors and find what Python stored on them.
#include <ATen/Tensor.h>
#include <ATen/ops/as_strided_native.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>

#include <algorithm>

#include <Python.h>

#include <vector>

// libtorch_python's wrappers into Python objects (declared here: their headers pull in pybind11, which makes
// the build ~30x slower): a Tensor's (the same object while the TensorImpl has one), a Storage's (created once
// per StorageImpl, then kept).
PyObject* THPVariable_Wrap(const at::TensorBase& var);
PyObject* THPStorage_Wrap(c10::Storage storage);
namespace torch {
THPDtype* getTHPDtype(at::ScalarType scalar_type);  // torch/csrc/DynamicTypes.h (its header pulls in pybind11)
}
extern PyObject* THPVariableClass;  // torch.Tensor
extern PyObject* ParameterClass;    // torch.nn.Parameter

// torch/csrc/autograd/python_variable.h's THPVariable (torch 2.14: the Tensor held by value); the library is
// built per torch version (core/native.py), so the layout is the installed torch's.
struct Variable {
  PyObject_HEAD
  at::Tensor cdata;
};

namespace {

PyObject* handle_name = nullptr;  // "_ttnn_handle", interned
PyObject* views_name = nullptr;   // "_ttnn_views"
PyObject* dtype_name = nullptr;   // "dtype"
PyObject* shape_name = nullptr;   // "shape"
PyObject* slow = nullptr;         // tensor.py's Python lookup (set_slow)
PyObject* slow_empty = nullptr;   // dispatch.py's Python _has_empty (set_slow_empty)

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

PyObject* tuple_of(c10::IntArrayRef values) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(values.size()));
  if (!t) return nullptr;
  for (size_t i = 0; i < values.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (!v) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

// The Handle's dtype is x's and its shape x's sizes (h.shape: a torch.Size). -1: an error is set.
int same_dtype_and_shape(PyObject* h, c10::ScalarType scalar_type, c10::IntArrayRef sizes, PyObject** dtype) {
  *dtype = PyObject_GetAttr(h, dtype_name);
  if (!*dtype) return -1;
  if (!PyObject_TypeCheck(*dtype, &THPDtypeType) ||
      reinterpret_cast<THPDtype*>(*dtype)->scalar_type != scalar_type)
    return 0;
  PyObject* shape = PyObject_GetAttr(h, shape_name);
  if (!shape) return -1;
  int same = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == static_cast<Py_ssize_t>(sizes.size());
  for (size_t i = 0; same && i < sizes.size(); ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(shape);
      return -1;
    }
    same = v == sizes[i];
  }
  Py_DECREF(shape);
  return same;
}

PyObject* handle(PyObject*, PyObject* x) {
  if (!slow) {
    PyErr_SetString(PyExc_RuntimeError, "ttnn_eager: handle() before set_slow()");
    return nullptr;
  }
  if (!THPVariableClass || !PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject*>(THPVariableClass)))
    Py_RETURN_NONE;
  PyTypeObject* type = Py_TYPE(x);
  if (type != reinterpret_cast<PyTypeObject*>(THPVariableClass) &&
      type != reinterpret_cast<PyTypeObject*>(ParameterClass))
    return PyObject_CallOneArg(slow, x);  // a subclass: its own untyped_storage, maybe
  try {
    c10::TensorImpl* impl = reinterpret_cast<Variable*>(x)->cdata.unsafeGetTensorImpl();
    if (impl->device_type() != c10::DeviceType::PrivateUse1) Py_RETURN_NONE;
    if (!impl->has_storage() || impl->has_symbolic_sizes_strides()) return PyObject_CallOneArg(slow, x);
    PyObject* s = THPStorage_Wrap(impl->storage());
    if (!s) return nullptr;
    PyObject* h = PyObject_GetAttr(s, handle_name);
    if (!h) {
      Py_DECREF(s);
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
      Py_RETURN_NONE;
    }
    if (h == Py_None) {
      Py_DECREF(s);
      return h;
    }
    auto scalar_type = impl->dtype().toScalarType();
    c10::IntArrayRef sizes = impl->sizes();
    PyObject* dtype = nullptr;
    int same = same_dtype_and_shape(h, scalar_type, sizes, &dtype);
    if (same < 0) {
      Py_XDECREF(dtype);
      Py_DECREF(h);
      Py_DECREF(s);
      return nullptr;
    }
    if (same && impl->storage_offset() == 0 && impl->is_contiguous()) {
      Py_DECREF(dtype);
      Py_DECREF(s);
      return h;  // the storage's base Handle
    }
    bool dtype_same = PyObject_TypeCheck(dtype, &THPDtypeType) &&
                      reinterpret_cast<THPDtype*>(dtype)->scalar_type == scalar_type;
    Py_DECREF(h);
    PyObject* found = nullptr;
    if (dtype_same) {  // the view Handle stored under x's key, if any
      PyObject* views = PyObject_GetAttr(s, views_name);
      if (!views) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
        PyErr_Clear();
      } else {
        PyObject* size_t_ = tuple_of(sizes);
        PyObject* stride_t = size_t_ ? tuple_of(impl->strides()) : nullptr;
        PyObject* offset = stride_t ? PyLong_FromLongLong(impl->storage_offset()) : nullptr;
        PyObject* key = offset ? PyTuple_Pack(4, size_t_, stride_t, offset, dtype) : nullptr;
        Py_XDECREF(size_t_);
        Py_XDECREF(stride_t);
        Py_XDECREF(offset);
        if (!key) {
          Py_DECREF(views);
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
        if (PyDict_CheckExact(views)) {
          found = PyDict_GetItemWithError(views, key);  // borrowed
          Py_XINCREF(found);
        }
        Py_DECREF(key);
        Py_DECREF(views);
        if (!found && PyErr_Occurred()) {
          Py_DECREF(dtype);
          Py_DECREF(s);
          return nullptr;
        }
      }
    }
    Py_DECREF(dtype);
    Py_DECREF(s);
    if (found) return found;
    return PyObject_CallOneArg(slow, x);  // a view not seen yet (derived in Python), or another dtype
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  }
}

// 1: x is a tensor on a ttnn device with no elements, 0: it is not, -1: Python decides (a subclass, symbolic sizes).
int empty_on_device(PyObject* x) {
  if (!PyObject_TypeCheck(x, reinterpret_cast<PyTypeObject*>(THPVariableClass))) return 0;
  PyTypeObject* type = Py_TYPE(x);
  if (type != reinterpret_cast<PyTypeObject*>(THPVariableClass) &&
      type != reinterpret_cast<PyTypeObject*>(ParameterClass))
    return -1;
  c10::TensorImpl* impl = reinterpret_cast<Variable*>(x)->cdata.unsafeGetTensorImpl();
  if (impl->has_symbolic_sizes_strides()) return -1;
  return impl->numel() == 0 && impl->device_type() == c10::DeviceType::PrivateUse1;
}

PyObject* has_empty(PyObject*, PyObject* args) {
  if (!slow_empty) {
    PyErr_SetString(PyExc_RuntimeError, "ttnn_eager: has_empty() before set_slow_empty()");
    return nullptr;
  }
  if (!THPVariableClass || !PyTuple_Check(args)) return PyObject_CallOneArg(slow_empty, args);
  try {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      int r = 0;
      if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
        PyObject** items = PySequence_Fast_ITEMS(a);
        if (n == 0 || PyLong_CheckExact(items[0])) continue;  // (sizes and dims: ints only)
        for (Py_ssize_t j = 0; j < n && r == 0; ++j) r = empty_on_device(items[j]);
      } else {
        r = empty_on_device(a);
      }
      if (r < 0) return PyObject_CallOneArg(slow_empty, args);
      if (r) Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  }
}

bool get_int(PyObject* o, int64_t& out) {
  if (!PyLong_CheckExact(o)) return false;
  out = PyLong_AsLongLong(o);
  if (out == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

bool get_ints(PyObject* o, std::vector<int64_t>& out) {
  if (!PyList_Check(o) && !PyTuple_Check(o)) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!get_int(items[i], out[i])) return false;
  return true;
}

int64_t wrap_dim(int64_t d, int64_t n) { return d < 0 ? d + n : d; }  // dispatch._dim

// The geometry of view op `kind` on x with arguments a[0..na): false where dispatch's _g_* return None.
bool geometry(long kind, c10::TensorImpl* x, PyObject* const* a, Py_ssize_t na, std::vector<int64_t>& size,
              std::vector<int64_t>& stride, int64_t& offset) {
  const int64_t n = x->dim();
  size.assign(x->sizes().begin(), x->sizes().end());
  stride.assign(x->strides().begin(), x->strides().end());
  offset = x->storage_offset();
  switch (kind) {
    case 0: {  // view(size)
      if (na != 1 || !x->is_contiguous() || !get_ints(a[0], size)) return false;
      int64_t numel = x->numel(), known = 1, infer = -1;
      for (size_t i = 0; i < size.size(); ++i) {
        if (size[i] == -1) {
          if (infer >= 0) return false;
          infer = static_cast<int64_t>(i);
        } else {
          known *= size[i];
        }
      }
      if (infer >= 0) {
        if (known == 0) return false;
        size[infer] = numel / known;
      }
      int64_t prod = 1;
      for (int64_t v : size) {
        if (v < 0) return false;
        prod *= v;
      }
      if (prod != numel) return false;
      stride.resize(size.size());
      int64_t step = 1;
      for (size_t i = size.size(); i-- > 0;) {
        stride[i] = step;
        step *= std::max<int64_t>(size[i], 1);
      }
      return true;
    }
    case 1:    // transpose(d0, d1)
    case 7: {  // t()
      int64_t d0 = 0, d1 = 1;
      if (kind == 7 ? (na != 0 || n != 2) : (na != 2 || !get_int(a[0], d0) || !get_int(a[1], d1))) return false;
      if (!n) return false;
      d0 = wrap_dim(d0, n);
      d1 = wrap_dim(d1, n);
      if (d0 < 0 || d0 >= n || d1 < 0 || d1 >= n) return false;
      std::swap(size[d0], size[d1]);
      std::swap(stride[d0], stride[d1]);
      return true;
    }
    case 2: {  // permute(dims)
      std::vector<int64_t> dims;
      if (na != 1 || !get_ints(a[0], dims) || static_cast<int64_t>(dims.size()) != n) return false;
      std::vector<bool> seen(n, false);
      for (auto& d : dims) {
        d = wrap_dim(d, n);
        if (d < 0 || d >= n || seen[d]) return false;
        seen[d] = true;
      }
      for (int64_t i = 0; i < n; ++i) {
        size[i] = x->sizes()[dims[i]];
        stride[i] = x->strides()[dims[i]];
      }
      return true;
    }
    case 3: {  // unsqueeze(d)
      int64_t d;
      if (na != 1 || !get_int(a[0], d)) return false;
      d = wrap_dim(d, n + 1);
      if (d < 0 || d > n) return false;
      stride.insert(stride.begin() + d, d < n ? size[d] * stride[d] : 1);
      size.insert(size.begin() + d, 1);
      return true;
    }
    case 4: {  // expand(size)
      std::vector<int64_t> want;
      if (na != 1 || !get_ints(a[0], want)) return false;
      const int64_t m = static_cast<int64_t>(want.size());
      if (m < n) return false;
      std::vector<int64_t> out_size, out_stride;
      for (int64_t i = 0; i < m; ++i) {
        int64_t j = i - (m - n), w = want[i];
        int64_t have = j >= 0 ? x->sizes()[j] : 1;
        if (w == -1) {
          if (j < 0) return false;
          w = have;
        }
        if (j >= 0 && have == w) {
          out_stride.push_back(x->strides()[j]);
        } else if (have == 1) {
          out_stride.push_back(0);
        } else {
          return false;
        }
        out_size.push_back(w);
      }
      size = std::move(out_size);
      stride = std::move(out_stride);
      return true;
    }
    case 5: {  // slice(d=0, start=None, end=None, step=1)
      int64_t d = 0, step = 1, start = 0, end = 0;
      if (na > 4 || !n) return false;
      if (na > 0 && !get_int(a[0], d)) return false;
      if (na > 3 && !get_int(a[3], step)) return false;
      if (step < 1) return false;
      d = wrap_dim(d, n);
      if (d < 0 || d >= n) return false;
      const int64_t length = size[d];
      bool has_start = na > 1 && a[1] != Py_None, has_end = na > 2 && a[2] != Py_None;
      if (has_start && !get_int(a[1], start)) return false;
      if (has_end && !get_int(a[2], end)) return false;
      start = !has_start ? 0 : (start < 0 ? start + length : start);
      end = !has_end ? length : (end < 0 ? end + length : end);
      start = std::min(std::max<int64_t>(start, 0), length);
      end = std::min(std::max<int64_t>(end, 0), length);
      end = std::max(end, start);
      size[d] = (end - start + step - 1) / step;
      offset += start * stride[d];
      stride[d] *= step;
      return true;
    }
    case 6: {  // select(d, index)
      int64_t d, index;
      if (na != 2 || !n || !get_int(a[0], d) || !get_int(a[1], index)) return false;
      d = wrap_dim(d, n);
      if (d < 0 || d >= n) return false;
      const int64_t length = size[d];
      if (!(-length <= index && index < length)) return false;
      if (index < 0) index += length;
      offset += index * stride[d];
      size.erase(size.begin() + d);
      stride.erase(stride.begin() + d);
      return true;
    }
  }
  return false;
}

PyObject* view(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) < 1) {
    PyErr_SetString(PyExc_TypeError, "view(kind, args, handle)");
    return nullptr;
  }
  long kind = PyLong_AsLong(args[0]);
  if (kind == -1 && PyErr_Occurred()) return nullptr;
  PyObject* x = PyTuple_GET_ITEM(args[1], 0);
  PyTypeObject* type = Py_TYPE(x);
  if (!THPVariableClass || (type != reinterpret_cast<PyTypeObject*>(THPVariableClass) &&
                            type != reinterpret_cast<PyTypeObject*>(ParameterClass)))
    Py_RETURN_NONE;
  try {
    const at::Tensor& base = reinterpret_cast<Variable*>(x)->cdata;
    c10::TensorImpl* impl = base.unsafeGetTensorImpl();
    if (!impl->has_storage() || impl->has_symbolic_sizes_strides()) Py_RETURN_NONE;
    std::vector<int64_t> size, stride;
    int64_t offset;
    if (!geometry(kind, impl, &PyTuple_GET_ITEM(args[1], 1), PyTuple_GET_SIZE(args[1]) - 1, size, stride, offset))
      Py_RETURN_NONE;
    at::Tensor alias = at::native::as_strided_tensorimpl(base, size, stride, offset);
    // tensor.py's add_view(alias, h, key): nothing to store for the base Handle or the base's geometry
    PyObject* s = THPStorage_Wrap(impl->storage());
    if (!s) return nullptr;
    PyObject* base_h = PyObject_GetAttr(s, handle_name);
    if (!base_h) {
      Py_DECREF(s);
      return nullptr;
    }
    PyObject* h = args[2];
    bool store = h != base_h;
    if (store && offset == 0 && alias.unsafeGetTensorImpl()->is_contiguous()) {
      PyObject* dtype = nullptr;
      int same = same_dtype_and_shape(base_h, impl->dtype().toScalarType(), size, &dtype);
      Py_XDECREF(dtype);
      if (same < 0) {
        Py_DECREF(base_h);
        Py_DECREF(s);
        return nullptr;
      }
      store = !same;
    }
    Py_DECREF(base_h);
    if (store) {
      PyObject* views = PyObject_GetAttr(s, views_name);
      if (!views) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
          Py_DECREF(s);
          return nullptr;
        }
        PyErr_Clear();
        views = PyDict_New();
        if (!views || PyObject_SetAttr(s, views_name, views) < 0) {
          Py_XDECREF(views);
          Py_DECREF(s);
          return nullptr;
        }
      }
      PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(impl->dtype().toScalarType()));
      PyObject* size_t_ = tuple_of(size);
      PyObject* stride_t = size_t_ ? tuple_of(stride) : nullptr;
      PyObject* off = stride_t ? PyLong_FromLongLong(offset) : nullptr;
      PyObject* key = off ? PyTuple_Pack(4, size_t_, stride_t, off, dtype) : nullptr;
      Py_XDECREF(size_t_);
      Py_XDECREF(stride_t);
      Py_XDECREF(off);
      int failed = !key || PyObject_SetItem(views, key, h) < 0;
      Py_XDECREF(key);
      Py_DECREF(views);
      if (failed) {
        Py_DECREF(s);
        return nullptr;
      }
    }
    Py_DECREF(s);
    return THPVariable_Wrap(alias);
  } catch (const c10::Error& e) {  // PyTorch's own message (the bounds check), as PyTorch raises it
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    return nullptr;
  }
}

PyObject* set_slow_empty(PyObject*, PyObject* fn) {
  Py_XSETREF(slow_empty, Py_NewRef(fn));
  Py_RETURN_NONE;
}

PyObject* set_slow(PyObject*, PyObject* fn) {
  Py_XSETREF(slow, Py_NewRef(fn));
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"handle", handle, METH_O, "core/tensor.py's maybe_handle: a ttnn tensor's Handle, else None"},
    {"set_slow", set_slow, METH_O, "the Python lookup handle() calls for the cases it leaves to Python"},
    {"view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(view)), METH_FASTCALL,
     "the alias of a common view op, its view Handle stored under its key"},
    {"has_empty", has_empty, METH_O, "core/dispatch.py's _has_empty: a ttnn tensor with no elements in args"},
    {"set_slow_empty", set_slow_empty, METH_O, "the Python _has_empty for the cases has_empty leaves to it"},
    {"new_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(new_tensor)), METH_FASTCALL,
     "a new contiguous ttnn tensor on a non-owning storage holding a Handle"},
    {"alias", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(alias)), METH_FASTCALL,
     "a tensor on base's storage with the given sizes, strides and storage offset"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ttnn_eager_native", nullptr, -1, methods};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__ttnn_eager_native() {
  handle_name = PyUnicode_InternFromString("_ttnn_handle");
  views_name = PyUnicode_InternFromString("_ttnn_views");
  dtype_name = PyUnicode_InternFromString("dtype");
  shape_name = PyUnicode_InternFromString("shape");
  if (!handle_name || !views_name || !dtype_name || !shape_name) return nullptr;
  return PyModule_Create(&module);
}
