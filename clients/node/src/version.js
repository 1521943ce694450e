// The version of this package: the server's (CMakeLists.txt project VERSION).
export const VERSION = '0.1.0';
