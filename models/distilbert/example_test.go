package distilbert_test

import (
	"context"
	"fmt"

	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/encoder"
)

// Classify texts with a DistilBERT sequence classifier from a folder or a
// Hugging Face model id.
func ExampleLoad() {
	ctx := context.Background()
	m, err := distilbert.Load(ctx, "../../../shared/models/sst2-distilbert-mini", encoder.Options{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	preds, err := m.Classify(ctx, []string{"a charming and often affecting journey"}, encoder.ClassifyOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(preds[0].Label)
}
