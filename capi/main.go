// Command capi is built with -buildmode=c-shared into liblmstream.so. It
// only translates between the C ABI of include/lmstream.h and the Go
// packages: handles to objects, JSON and C buffers to Go values, errors to
// status codes. The public lms_* symbols live in shim.c, which refuses calls
// in a forked child before they can enter the Go runtime.
package main

func main() {}
