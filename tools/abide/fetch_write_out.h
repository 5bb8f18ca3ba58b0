// `abide fetch -w FORMAT`: what is written after each request.
#pragma once

namespace abide::cli {}  // namespace abide::cli
