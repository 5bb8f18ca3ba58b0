// Debian's cpp-httplib (the tests' HTTP servers) is a compiled library without
// ThreadSanitizer instrumentation: TSan sees its memcpy/memcmp calls but not
// the synchronisation inside it, and reports races that are not there. Ignore
// what that library's own calls touch; abide's code stays fully checked.
#include "sanitizers.h"

#if ABIDE_TEST_TSAN
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libcpp-httplib.so\n"; }
#endif
