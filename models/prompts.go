package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
)

// PromptsFile is the sentence-transformers file (2.4 and later) whose
// "prompts" Load reads: named texts prefixed to an input before it is
// tokenized ({"query": "query: ", "passage": "passage: "}), with the name
// sentence-transformers applies by default in "default_prompt_name".
const PromptsFile = "config_sentence_transformers.json"

// prompts are a model folder's named prompts (PromptsFile).
type prompts struct {
	byName      map[string]string
	defaultName string
}

// readPrompts reads dir's PromptsFile; none without the file. A file that
// is not JSON of that shape is an error wrapping ErrConfig, as TEI fails
// to start on it.
func readPrompts(dir string) (prompts, error) {
	f := filepath.Join(dir, PromptsFile)
	b, err := checkpoint.ReadFileLimited(f, checkpoint.MaxConfigSize, "sentence-transformers config")
	if errors.Is(err, fs.ErrNotExist) {
		return prompts{}, nil
	}
	if err != nil {
		return prompts{}, fmt.Errorf("models: %w: %w", err, ErrConfig)
	}
	var c struct {
		Prompts     map[string]string `json:"prompts"`
		DefaultName *string           `json:"default_prompt_name"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return prompts{}, fmt.Errorf("models: %s: %w (want \"prompts\" an object of names to texts): %w", f, err, ErrConfig)
	}
	pr := prompts{byName: c.Prompts}
	if c.DefaultName != nil {
		pr.defaultName = *c.DefaultName
	}
	return pr, nil
}

// Prompts are the named prompts of the model folder's
// config_sentence_transformers.json (PromptsFile), a copy; nil when it
// has none.
func (p *Pipeline) Prompts() map[string]string { return maps.Clone(p.prompts.byName) }

// DefaultPromptName is PromptsFile's default_prompt_name ("" when it
// names none). sentence-transformers applies it when encode is given
// neither prompt nor prompt_name; this package, like TEI, never applies
// it by itself: pass it as EmbedOptions.PromptName to do so.
func (p *Pipeline) DefaultPromptName() string { return p.prompts.defaultName }

// Prompt is the text of the prompt named name (Prompts). A name the
// model's prompts lack is an error wrapping ErrInput that lists them.
func (p *Pipeline) Prompt(name string) (string, error) {
	if err := p.refuseClosed("Prompt"); err != nil {
		return "", err
	}
	if text, ok := p.prompts.byName[name]; ok {
		return text, nil
	}
	if len(p.prompts.byName) == 0 {
		return "", fmt.Errorf("models: prompt name %q: the model has no prompts (%s): %w", name, PromptsFile, ErrInput)
	}
	return "", fmt.Errorf("models: prompt name %q is not one of the model's prompts (%s): %w",
		name, strings.Join(slices.Sorted(maps.Keys(p.prompts.byName)), ", "), ErrInput)
}

// promptOf is the prompt text of a call given a prompt and a prompt name
// (at most one of the two).
func (p *Pipeline) promptOf(prompt, name string) (string, error) {
	switch {
	case name == "":
		return prompt, nil
	case prompt != "":
		return "", fmt.Errorf("models: a prompt (%q) and a prompt name (%q) are given: give one: %w", prompt, name, ErrInput)
	}
	return p.Prompt(name)
}

// withPrompt is texts with prompt prefixed to each (texts itself when
// prompt is empty).
func withPrompt(prompt string, texts []string) []string {
	if prompt == "" {
		return texts
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = prompt + t
	}
	return out
}
