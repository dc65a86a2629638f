package engine

// NewCPU is the "cpu" backend, for the external tests.
var NewCPU = newCPU

// TinyFile writes a tiny random model, for the external tests.
var TinyFile = tinyFile
