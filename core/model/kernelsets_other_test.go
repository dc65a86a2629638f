//go:build !amd64 || noasm

package model

import "testing"

func kernelSets() []string { return nil }

func useKernels(tb testing.TB, set string) { tb.Fatalf("no kernel set %q here", set) }
