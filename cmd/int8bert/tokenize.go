package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/int8bert/int8bert/tokenizer"
)

// tokenizeRecord is one output line of "int8bert tokenize".
type tokenizeRecord struct {
	InputIDs      []int32  `json:"input_ids"`
	TokenTypeIDs  []int32  `json:"token_type_ids"`
	AttentionMask []int32  `json:"attention_mask"`
	Offsets       [][2]int `json:"offsets"`
}

// runTokenize reads one text per line from stdin (with -pair: two texts
// separated by a tab) and prints one JSON object per line. Offsets count
// runes of the input texts; lines may end in \n or \r\n.
func runTokenize(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("tokenizer", "", "tokenizer.json, vocab.txt, or a folder holding one (required)")
	pair := fs.Bool("pair", false, "each line holds two texts separated by a tab")
	maxLen := fs.Int("max-length", 0, "truncate (longest first) to at most this many tokens, special tokens included; 0: no limit")
	pad := fs.Bool("pad", false, "pad every line to -max-length")
	noSpecial := fs.Bool("no-special", false, "leave out [CLS], [SEP], <s>, </s>...")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tokenize: unexpected arguments %q", fs.Args())
	}
	if *path == "" {
		return fmt.Errorf("tokenize: -tokenizer is required")
	}
	if *maxLen < 0 {
		return fmt.Errorf("tokenize: -max-length %d is negative", *maxLen)
	}
	if *pad && *maxLen == 0 {
		return fmt.Errorf("tokenize: -pad needs -max-length")
	}
	tk, err := tokenizer.Load(*path)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	opts := tokenizer.Options{SkipSpecialTokens: *noSpecial, MaxLength: *maxLen}
	if *maxLen > 0 {
		opts.Truncation = tokenizer.LongestFirst
	}
	if *pad {
		opts.Padding = tokenizer.PadFixed
	}

	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	const batch = 256
	var texts []string
	var pairs []tokenizer.Pair
	line, first := 0, 1
	flush := func() error {
		var encs []tokenizer.Encoding
		var err error
		if *pair {
			encs, err = tk.EncodePairBatch(ctx, pairs, opts)
		} else {
			encs, err = tk.EncodeBatch(ctx, texts, opts)
		}
		if err != nil {
			return fmt.Errorf("tokenize: lines %d-%d: %w", first, line, err)
		}
		for i := range encs {
			e := &encs[i]
			if err := enc.Encode(tokenizeRecord{e.IDs, e.TypeIDs, e.AttentionMask, e.Offsets}); err != nil {
				return err
			}
		}
		texts, pairs, first = texts[:0], pairs[:0], line+1
		return nil
	}
	for sc.Scan() {
		line++
		s := strings.TrimSuffix(sc.Text(), "\r")
		if *pair {
			a, b, ok := strings.Cut(s, "\t")
			if !ok {
				return fmt.Errorf("tokenize: line %d: -pair needs two texts separated by a tab", line)
			}
			pairs = append(pairs, tokenizer.Pair{A: a, B: b})
		} else {
			texts = append(texts, s)
		}
		if len(texts)+len(pairs) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("tokenize: reading stdin: %w", err)
	}
	if len(texts)+len(pairs) > 0 {
		return flush()
	}
	return nil
}
