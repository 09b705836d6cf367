package encoder

import (
	"errors"
	"fmt"
	"io/fs"
)

// Error is an error whose message says what failed, on which input and
// what to do, and nothing else (docs/DESIGN.md section 2.1): errors.Is and
// errors.As find its sentinels (ErrConfig, ErrInput, ErrClosed, and
// standard ones such as fs.ErrNotExist) and its causes, but their text is
// not appended to the message as a category suffix.
type Error struct {
	// Msg is the whole message.
	Msg string
	// Errs are the sentinels and causes errors.Is and errors.As look into.
	Errs []error
}

// Error returns the message alone.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the sentinels and causes.
func (e *Error) Unwrap() []error { return e.Errs }

// Errorf formats a message as fmt.Errorf does (%w marks a cause, whose
// text stays where the verb is) and returns it as an Error that also
// wraps sentinel, without sentinel's text.
func Errorf(sentinel error, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Msg: err.Error(), Errs: []error{sentinel, err}}
}

// ConfigFileError is the error of pkg (the package's name, the start of
// the message) when dir's config.json cannot be read: missing, or not a
// Hugging Face configuration. It wraps ErrConfig and err.
func ConfigFileError(pkg, dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{
			Msg:  fmt.Sprintf("%s: %s has no config.json; give the folder of a Hugging Face model (config.json, the weights and the tokenizer files)", pkg, dir),
			Errs: []error{ErrConfig, err},
		}
	}
	return Errorf(ErrConfig, "%s: %w; config.json must be a Hugging Face model configuration: download it again from the model's repository", pkg, err)
}

// weightsError is the error of LoadTask when dir's weights cannot be
// opened: missing, or not a safetensors or PyTorch file. It wraps
// ErrConfig and err.
func weightsError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &Error{
			Msg:  fmt.Sprintf("encoder: %s has no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin); download them from the model's Hugging Face repository", dir),
			Errs: []error{ErrConfig, err},
		}
	}
	return Errorf(ErrConfig, "encoder: %w; the file is not a model's weights (safetensors or PyTorch): download it again from the model's repository", err)
}
