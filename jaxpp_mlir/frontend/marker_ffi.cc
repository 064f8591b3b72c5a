// XLA FFI handlers for the `jaxpp.enter_stage` stage marker.
//
// The marker is an identity whose result i aliases operand i
// (`output_operand_aliases`), so XLA hands the handler the same buffer as
// argument and result and there is nothing to do. These handlers exist only
// so that a marked program still compiles and runs under plain `jax.jit`;
// `jaxpp_mlir.partition` removes the markers before anything is compiled.
//
// The same handlers also serve `jaxpp.loop_marker`, treduce's identity on the
// integer microbatch counter: they take buffers of any dtype and rank,
// scalars included. (Error messages name `jaxpp.enter_stage` for both.)

#include <cstddef>
#include <cstring>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Host handler. Copies a result whose buffer is not its operand's, which XLA
// should never produce given the aliasing, but costs nothing to honour.
ffi::Error EnterStageHostImpl(ffi::RemainingArgs args, ffi::RemainingRets rets) {
  if (args.size() != rets.size()) {
    return ffi::Error::InvalidArgument(
        "jaxpp.enter_stage: operand and result counts differ");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    auto arg = args.get<ffi::AnyBuffer>(i);
    auto ret = rets.get<ffi::AnyBuffer>(i);
    if (arg.has_error()) return arg.error();
    if (ret.has_error()) return ret.error();
    void* src = arg.value().untyped_data();
    void* dst = (*ret.value()).untyped_data();
    size_t bytes = arg.value().size_bytes();
    if (src != dst && bytes != 0) std::memcpy(dst, src, bytes);
  }
  return ffi::Error::Success();
}

// Device handler: buffers live in device memory, so it can only check that
// every result aliases its operand.
ffi::Error EnterStageAliasedImpl(ffi::RemainingArgs args, ffi::RemainingRets rets) {
  if (args.size() != rets.size()) {
    return ffi::Error::InvalidArgument(
        "jaxpp.enter_stage: operand and result counts differ");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    auto arg = args.get<ffi::AnyBuffer>(i);
    auto ret = rets.get<ffi::AnyBuffer>(i);
    if (arg.has_error()) return arg.error();
    if (ret.has_error()) return ret.error();
    if (arg.value().size_bytes() != 0 &&
        arg.value().untyped_data() != (*ret.value()).untyped_data()) {
      return ffi::Error::Internal(
          "jaxpp.enter_stage: a result does not alias its operand");
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxppEnterStageHost, EnterStageHostImpl,
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxppEnterStageAliased, EnterStageAliasedImpl,
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets());
