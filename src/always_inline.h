// Internal: ABIDE_ALWAYS_INLINE, for the few small helpers of hot loops whose
// inlining GCC's heuristics would otherwise decide call by call. Not installed.
#pragma once

#if defined(__GNUC__)
#define ABIDE_ALWAYS_INLINE [[gnu::always_inline]]
#else
#define ABIDE_ALWAYS_INLINE
#endif
