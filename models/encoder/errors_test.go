package encoder

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestErrorWording: an Error's message is its text alone, with no
// sentinel suffix, while errors.Is finds the sentinel and what the %w
// cause wraps, and errors.As the cause's type.
func TestErrorWording(t *testing.T) {
	_, cause := os.Stat("/no/such/file/for/int8bert")
	err := Errorf(ErrConfig, "encoder: %w; check the path", cause)
	want := cause.Error() + "; check the path"
	if err.Error() != "encoder: "+want {
		t.Errorf("message %q, want %q", err, "encoder: "+want)
	}
	for _, target := range []error{ErrConfig, fs.ErrNotExist} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) is false", err, target)
		}
	}
	if errors.Is(err, ErrInput) {
		t.Errorf("errors.Is(%v, ErrInput) is true", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("errors.As finds no *fs.PathError in %v", err)
	}
	if e := ConfigFileError("models", "dir", cause); !errors.Is(e, fs.ErrNotExist) || !errors.Is(e, ErrConfig) || e.Error() != "models: dir has no config.json; give the folder of a Hugging Face model (config.json, the weights and the tokenizer files)" {
		t.Errorf("ConfigFileError: %q", e)
	}
}
