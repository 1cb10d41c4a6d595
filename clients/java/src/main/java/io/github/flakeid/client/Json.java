package io.github.flakeid.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader for the server's answers: objects become Maps,
 * arrays Lists, strings Strings, numbers Longs (or Doubles with a fraction
 * or exponent), and true, false and null themselves. The JDK has none, and
 * the client takes no dependency.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** Parses text; throws IllegalArgumentException saying where it is not JSON. */
    static Object parse(String text) {
        Json j = new Json(text);
        Object v = j.value();
        j.space();
        if (j.i != j.s.length()) {
            throw j.bad("trailing text");
        }
        return v;
    }

    private IllegalArgumentException bad(String why) {
        return new IllegalArgumentException("not JSON at offset " + i + ": " + why);
    }

    private void space() {
        while (i < s.length() && " \t\r\n".indexOf(s.charAt(i)) >= 0) {
            i++;
        }
    }

    private Object value() {
        space();
        if (i >= s.length()) {
            throw bad("unexpected end");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return object();
            case '[':
                return array();
            case '"':
                return string();
            default:
                for (String word : new String[] {"true", "false", "null"}) {
                    if (s.startsWith(word, i)) {
                        i += word.length();
                        return word.equals("null") ? null : Boolean.valueOf(word);
                    }
                }
                return number();
        }
    }

    private Map<String, Object> object() {
        var m = new LinkedHashMap<String, Object>();
        i++;
        space();
        if (i < s.length() && s.charAt(i) == '}') {
            i++;
            return m;
        }
        for (;;) {
            space();
            if (i >= s.length() || s.charAt(i) != '"') {
                throw bad("want a key");
            }
            String k = string();
            space();
            if (i >= s.length() || s.charAt(i++) != ':') {
                throw bad("want ':'");
            }
            m.put(k, value());
            space();
            if (i >= s.length()) {
                throw bad("unexpected end");
            }
            char c = s.charAt(i++);
            if (c == '}') {
                return m;
            }
            if (c != ',') {
                throw bad("want ',' or '}'");
            }
        }
    }

    private List<Object> array() {
        var l = new ArrayList<Object>();
        i++;
        space();
        if (i < s.length() && s.charAt(i) == ']') {
            i++;
            return l;
        }
        for (;;) {
            l.add(value());
            space();
            if (i >= s.length()) {
                throw bad("unexpected end");
            }
            char c = s.charAt(i++);
            if (c == ']') {
                return l;
            }
            if (c != ',') {
                throw bad("want ',' or ']'");
            }
        }
    }

    private String string() {
        var b = new StringBuilder();
        i++;
        while (i < s.length()) {
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) {
                break;
            }
            char e = s.charAt(i++);
            switch (e) {
                case 'n' -> b.append('\n');
                case 't' -> b.append('\t');
                case 'r' -> b.append('\r');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'u' -> {
                    if (i + 4 > s.length()) {
                        throw bad("short \\u escape");
                    }
                    b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    i += 4;
                }
                default -> b.append(e);
            }
        }
        throw bad("unterminated string");
    }

    private Object number() {
        int start = i;
        while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
            i++;
        }
        String t = s.substring(start, i);
        try {
            return t.matches("-?\\d+") ? (Object) Long.parseLong(t) : (Object) Double.parseDouble(t);
        } catch (NumberFormatException e) {
            throw bad("bad number \"" + t + "\"");
        }
    }
}
