package segment

import "fmt"

// MaxStep is the largest step a tag may have (Leaf's step column is an INT).
const MaxStep = 1<<31 - 1

// ValidName checks a tag name: 1–128 bytes of ASCII letters, digits and
// . _ - : / (Leaf's biz_tag is a VARCHAR(128); the character set keeps names
// safe in URL paths, keys and logs).
func ValidName(name string) error {
	if len(name) == 0 || len(name) > 128 {
		return fmt.Errorf("%w: tag %q is %d bytes, want 1–128", ErrInvalidTag, clip(name), len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == ':', c == '/':
		default:
			return fmt.Errorf("%w: tag %q has %q at byte %d; want letters, digits and . _ - : /", ErrInvalidTag, clip(name), c, i+1)
		}
	}
	return nil
}

// ValidateTag checks a tag about to be created: its name, a step in
// 1–MaxStep, a description of at most 256 bytes and a MaxID ≥ 0.
func ValidateTag(t Tag) error {
	if err := ValidName(t.Name); err != nil {
		return err
	}
	switch {
	case t.Step < 1 || t.Step > MaxStep:
		return fmt.Errorf("%w: tag %q: step %d, want 1–%d", ErrInvalidTag, t.Name, t.Step, MaxStep)
	case len(t.Description) > 256:
		return fmt.Errorf("%w: tag %q: description of %d bytes, want at most 256", ErrInvalidTag, t.Name, len(t.Description))
	case t.MaxID < 0:
		return fmt.Errorf("%w: tag %q: max id %d, want ≥ 0", ErrInvalidTag, t.Name, t.MaxID)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
