package engine

// NewCPU is the "cpu" backend, for the external tests.
var NewCPU = newCPU
