// stb_image compiled into fuzz_image, instrumented like the rest of the target, in place of
// Debian's libstb.so (tests/fuzz/CMakeLists.txt says how): AddressSanitizer and UBSan check stb's
// PNG, BMP and GIF decoders, and libFuzzer sees their coverage.
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
