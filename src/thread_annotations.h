// thread_annotations.h: clang's thread-safety attributes, so that the clang
// builds check at compile time that each guarded member is touched only with
// its mutex held (-Wthread-safety). Empty for other compilers. Not installed.
#pragma once

#if defined(__clang__)
#define ABIDE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ABIDE_THREAD_ANNOTATION(x)
#endif

#define ABIDE_CAPABILITY(x) ABIDE_THREAD_ANNOTATION(capability(x))
#define ABIDE_SCOPED_CAPABILITY ABIDE_THREAD_ANNOTATION(scoped_lockable)
#define ABIDE_GUARDED_BY(x) ABIDE_THREAD_ANNOTATION(guarded_by(x))
#define ABIDE_PT_GUARDED_BY(x) ABIDE_THREAD_ANNOTATION(pt_guarded_by(x))
#define ABIDE_ACQUIRE(...) ABIDE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ABIDE_RELEASE(...) ABIDE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ABIDE_TRY_ACQUIRE(...) ABIDE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ABIDE_REQUIRES(...) ABIDE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ABIDE_EXCLUDES(...) ABIDE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ABIDE_NO_THREAD_SAFETY_ANALYSIS ABIDE_THREAD_ANNOTATION(no_thread_safety_analysis)
