// Harness and Recorder are header-only so the timed loop inlines; this file anchors the
// translation unit for the build and holds nothing else on purpose.
#include "workloads/harness.hpp"
