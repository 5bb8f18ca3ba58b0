// Carries the precompiled header that every test reuses (tests/CMakeLists.txt).
