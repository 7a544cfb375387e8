//go:build !pipec_testhook

package main

// startProfile profiles nothing: only a test build (-tags pipec_testhook,
// profile_testhook.go) reads PIPEC_TEST_CPUPROFILE.
func startProfile() (stop func()) { return func() {} }
