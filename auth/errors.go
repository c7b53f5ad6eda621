package auth

import (
	"errors"
	"strconv"
)

// The kinds of refusal: errors.Is tells them apart.
var (
	// ErrUnauthenticated: no credentials where they are needed, an unknown
	// access key, a wrong signature, or a gRPC signature outside its
	// window.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrDenied: the user has no right to the operation.
	ErrDenied = errors.New("permission denied")
)

// Reason is why a request was refused, a label of the refusal counters.
type Reason uint8

// The reasons.
const (
	ReasonNoCredentials Reason = iota
	ReasonUnknownKey
	ReasonBadSignature
	ReasonExpired
	ReasonMalformed
	ReasonDenied
	NumReasons
)

var reasonNames = [NumReasons]string{"no_credentials", "unknown_access_key", "bad_signature", "expired", "malformed", "denied"}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Error is a refusal. Its message names what was refused and why, never a
// secret.
type Error struct {
	Kind      error // ErrUnauthenticated or ErrDenied
	Reason    Reason
	AccessKey string // "" when unknown
	Detail    string
}

func (e *Error) Error() string {
	s := "auth: " + e.Kind.Error()
	if e.AccessKey != "" {
		s += ": user " + strconv.Quote(e.AccessKey)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *Error) Unwrap() error { return e.Kind }

func unauthenticated(r Reason, accessKey, detail string) *Error {
	return &Error{Kind: ErrUnauthenticated, Reason: r, AccessKey: accessKey, Detail: detail}
}
