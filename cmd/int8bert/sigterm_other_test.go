//go:build !unix

package main

import "errors"

func sendSIGTERM() error { return errors.New("SIGTERM cannot be sent to a process on this OS") }

const canSIGTERM = false
