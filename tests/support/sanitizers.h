// Which sanitizer this test binary runs under, for either compiler: GCC
// defines __SANITIZE_*__, clang answers __has_feature.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define ABIDE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ABIDE_TEST_TSAN 1
#endif
#endif
#ifndef ABIDE_TEST_TSAN
#define ABIDE_TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__) || ABIDE_TEST_TSAN
#define ABIDE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ABIDE_TEST_SANITIZED 1
#endif
#endif
#ifndef ABIDE_TEST_SANITIZED
#define ABIDE_TEST_SANITIZED 0
#endif
