// Linked into every target of an ASan build (EIN_SANITIZE with address).
// LLVM's BumpPtrAllocator poisons fresh slabs and unpoisons each allocation,
// but only in code compiled with ASan: ours, inlined from LLVM's headers. The
// MLIR libraries from Debian are not, so an allocation they make in a slab
// our code poisoned stays poisoned and every read of it is a false
// use-after-poison. Manual poisoning is therefore off; ASan's own checks
// (heap, stack, globals) stay on.
extern "C" const char *__asan_default_options() { return "allow_user_poisoning=0"; }
