#!/usr/bin/env python3
"""Deterministic corpus of tokenizer test strings (seeded; no network, no files read).

Usage: python3 scripts/tokenizer/make_strings.py [--seed N] [--count N] -o strings.json

Writes a JSON array of strings covering what a byte-level BPE tokenizer must get right:
English prose, Chinese, Japanese, other scripts, code, emoji (ZWJ sequences, skin tones,
flags, keycaps), numbers and long digit runs, whitespace runs, special tokens embedded in
text, contractions, NFD accents, unusual but valid code points, very long words and mixed
scripts. The same seed always gives the same bytes.
"""
import argparse
import json
import random
import unicodedata

WORDS = (
    "the of and to in is that it was for on are as with his they at be this from have or by "
    "one had not but what all were when we there can an your which their said if do will each "
    "about how up out them then she many some so these would other into has more her two like "
    "him see time could no make than first been its who now people my made over did down only "
    "way find use may water long little very after words called just where most know get "
    "through back much before go good new write our used me man too any day same right look "
    "think also around another came come work three word must because does part even place "
    "well such here take why things help put years different away again off went old number "
    "tokenizer inference kernel manifest pipeline throughput latency gradient transformer "
    "attention embedding vocabulary normalisation merge rank byte unicode streaming decoder "
    "Mississippi antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis "
    "GPU CUDA H200 NVIDIA PyTorch HuggingFace JSON UTF-8 API HTTP/2 e-mail co-operate re-enter "
    "naïve café résumé façade jalapeño Zürich São Paulo Kraków Ærø smörgåsbord"
).split()

CONTRACTIONS = [
    "don't", "I'm", "you're", "they've", "we'll", "she'd", "it's", "IT'S", "I'M", "YOU'RE",
    "We'Re", "They'VE", "He'LL", "can't", "won't", "shouldn't've", "y'all", "o'clock",
    "rock'n'roll", "Dave's", "James'", "'tis", "the '90s", "it’s", "don’t", "I’ve",
    "ſ's", "''s", "'S", "'D", "'ll'll", "x'sy",
]

CHINESE = [
    "你好", "世界", "中国", "人工智能", "机器学习", "深度学习", "自然语言处理", "分词器", "北京", "上海",
    "我们", "今天", "天气", "很好", "谢谢", "不客气", "计算机", "程序", "数据", "模型", "推理",
    "显卡", "内存", "吞吐量", "延迟", "龍", "體", "書", "學", "愛", "蘋果", "電腦", "繁體字",
    "的", "了", "是", "在", "有", "和", "就", "不", "人", "都", "一", "一个", "上", "也", "很",
    "到", "说", "要", "去", "你", "会", "着", "没有", "看", "好", "自己", "这", "𠮷", "𡈽", "𪚥",
]
CHINESE_PUNCT = ["，", "。", "！", "？", "：", "；", "、", "“", "”", "（", "）", "《", "》", "……", "——", "·"]

JAPANESE = [
    "こんにちは", "ありがとう", "ございます", "日本語", "東京", "大阪", "カタカナ", "ひらがな", "漢字",
    "コンピュータ", "トークナイザー", "プログラミング", "です", "ます", "でした", "ません", "私は", "学生",
    "猫", "犬", "桜", "富士山", "ｶﾀｶﾅ", "ﾃｽﾄ", "ー", "っ", "ゃ", "ゅ", "ょ", "ヴ", "ゔ", "〜", "々",
]
JAPANESE_PUNCT = ["、", "。", "「", "」", "『", "』", "・", "！", "？", "（", "）", "　"]

OTHER_SCRIPTS = [
    "Привет, как дела?", "Съешь же ещё этих мягких французских булок", "Ελληνικά γράμματα αβγδ",
    "مرحبا بالعالم", "العربية لغة جميلة", "שלום עולם", "עברית", "नमस्ते दुनिया", "हिन्दी भाषा",
    "안녕하세요 세계", "한국어 토크나이저", "สวัสดีชาวโลก", "ภาษาไทย", "Tiếng Việt có dấu",
    "Xin chào thế giới", "ქართული ენა", "Հայերեն", "ᚠᛇᚻ᛫ᛒᛦᚦ", "ⴰⵣⵓⵍ", "ꦲꦏ꧀ꦱꦫ", "བོད་ཡིག",
    "ᐃᓄᒃᑎᑐᑦ", "Ελλάδα", "Ꭳ ᏣᎳᎩ", "தமிழ்", "বাংলা", "ગુજરાતી", "ಕನ್ನಡ", "മലയാളം", "සිංහල",
    "Deutsch: Straße, Größe, ÄÖÜ", "Français: œuvre, garçon, où", "Español: ¿Qué tal? ¡Hola!",
    "Polski: zażółć gęślą jaźń", "Türkçe: İstanbul ışık", "Čeština: příliš žluťoučký kůň",
]

EMOJI = [
    "😀", "😂", "🥲", "🤖", "🚀", "🔥", "❤️", "❤", "♥️", "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿",
    "👋🏽", "🧑‍💻", "👩‍💻", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🏳️‍🌈", "🏳️‍⚧️", "🧔🏻‍♂️", "👩🏿‍🔬",
    "🇨🇳", "🇯🇵", "🇺🇸", "🇩🇪", "🇫🇷", "🇬🇧", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "*️⃣", "©️", "™️", "☺", "☺️",
    "🫠", "🫶🏼", "🐈‍⬛", "🐻‍❄️", "😶‍🌫️", "❤️‍🔥", "🤷‍♀️", "🙇🏻‍♂️", "🤝", "🫡", "🧬", "🦀", "🐍",
]

CODE = [
    'def {f}({a}, {b}=None):\n    """Return the {a}."""\n    if {b} is None:\n        return {a}\n    return {a} + {b}\n',
    'for i in range({n}):\n\tprint(f"{{i}}: {{i ** 2}}")\n',
    "class {F}:\n    def __init__(self):\n        self.{a} = []\n\n    def __repr__(self) -> str:\n        return f'{F}({{self.{a}!r}})'\n",
    '#include <vector>\n\nint {f}(const std::vector<int>& {a}) {{\n  int s = 0;\n  for (int x : {a}) s += x * {n};\n  return s;\n}}\n',
    'template <typename T>\nstruct {F} {{\n    T {a}{{}};\n    auto operator<=>(const {F}&) const = default;\n}};\n',
    'const {f} = async ({a}) => {{\n  const res = await fetch(`/api/${{{a}}}`);\n  return res.json();\n}};\n',
    'fn {f}({a}: &[u8]) -> Result<usize, Box<dyn std::error::Error>> {{\n    Ok({a}.iter().filter(|&&b| b == b\'\\n\').count())\n}}\n',
    'func {F}({a} []string) map[string]int {{\n\tm := make(map[string]int)\n\tfor _, s := range {a} {{\n\t\tm[s]++\n\t}}\n\treturn m\n}}\n',
    "SELECT {a}, COUNT(*) AS n\nFROM {b}\nWHERE {a} <> '' AND n >= {n}\nGROUP BY {a}\nORDER BY n DESC;\n",
    '<div class="{a}">\n  <p id="{b}">Hello &amp; welcome</p>\n  <!-- {n} -->\n</div>\n',
    '{{"{a}": [{n}, {n}.5, -1e-9, true, null], "{b}": {{"nested": "\\u00e9\\n"}}}}\n',
    '#!/usr/bin/env bash\nset -euo pipefail\nfor f in "$@"; do\n  echo "${{f%.txt}}" | tr a-z A-Z >> /tmp/{a}.log 2>&1\ndone\n',
    'public static void {f}(String[] {a}) {{\n        System.out.println("{b}" + {a}.length);\n    }}\n',
    '{a} = lambda x: x if x < {n} else {a}(x // 2)  # recursion\n',
    '    if ({a} != nullptr && {a}->next) {{ {a} = {a}->next; }} // {n}\n',
    '\\begin{{equation}}\n  E = mc^2 + \\sum_{{i=0}}^{{{n}}} \\alpha_i x^i\n\\end{{equation}}\n',
    'x := [{n}]int{{}}; y := x[:{n}/2]; z := append(y, 0x{n:x}, 0b101, 0o17)\n',
    '    }}\n  }}\n}}\n\n\n// end of {f}\n',
]

IDENTS = ["foo", "bar", "baz", "value", "items", "tokenIds", "snake_case_name", "CamelCase",
          "__init__", "x1", "ptr", "self", "idx", "buf", "kMaxTokens", "HTTPServer", "getURL", "utf8Bytes"]

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|box_end|>",
            "<|vision_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
            "<|fim_suffix|>", "<think>", "</think>", "<|file_sep|>", "<|repo_name|>"]
NEAR_SPECIALS = ["<|im_start", "im_end|>", "<|endoftext", "<|im_start |>", "< |im_end|>", "<|IM_END|>",
                 "<|im_start|", "<<|im_end|>>", "<|<|endoftext|>|>", "<think", "think>", "<|>"]

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ",
              "\u00a0", "\u3000", "\u2009", "\u2003", "\u202f", "\u000b", "\u000c", "\u0085",
              "\u2028", "\u2029", "\u200b", "\u1680", "        ", "\n\n\n\n", " \t \t", "\t\n\t\n"]

UNUSUAL = [
    "\u0301abc", "\u0300", "a\u0336b\u0336", "\u200d", "\u200c", "\ufeffBOM", "\ufffd", "\ufffe",
    "\uffff", "\U0010ffff", "\U000e0001", "\ue000\uf8ff", "\U000f0000", "\U0001d400\U0001d41b",
    "\u200f\u05e9\u200e", "\u202eevil\u202c", "\x00", "\x01\x02\x7f", "\x1b[31mred\x1b[0m",
    "\u0085", "ĠĊ", "Ġhello", "Ċ", "ÃĥÂ", "ﬁnance", "①②③", "Ⅻ", "½¼¾", "²³¹", "ℌ", "K", "Å",
    "\u00e9", "e\u0301", "\u1e9b\u0323", "\u0958", "\u2126", "\u212b", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗̻ͦ", "🏻", "\ufe0f",
    "\U0001f3fb\U0001f3fc", "🇦", "\u034f", "\u180e", "\u2060", "\u00ad", "\u061c", "ᅟ", "ᄀ\u1161\u11a8",
    "\u0e33", "\u0f77", "\uff21\uff42\uff43", "\U0001f1e6\U0001f1e8\U0001f1e6", "❤\ufe0e", "\u3099\u309a",
]

NFD_SOURCES = ["café", "résumé", "naïve", "Ångström", "Ærøskøbing", "Tiếng Việt", "crème brûlée",
               "São João", "Ελληνικά", "Ślůžę", "한국어", "ドラゴンボール", "がぎぐげご", "ñandú", "Ça va ?"]


def rand_prose(r, n_words):
    out = []
    for i in range(n_words):
        w = r.choice(WORDS) if r.random() > 0.12 else r.choice(CONTRACTIONS)
        if i == 0 or out and out[-1][-1:] in ".!?":
            w = w[:1].upper() + w[1:]
        elif r.random() < 0.05:
            w = w.upper()
        out.append(w)
        p = r.random()
        if p < 0.08:
            out[-1] += ","
        elif p < 0.13:
            out[-1] += r.choice([".", "!", "?", ";", ":", "...", " -", " —"])
    s = " ".join(out)
    if r.random() < 0.3:
        s = r.choice(['"', "(", "[", "'", "“"]) + s + r.choice(['"', ")", "]", "'", "”"])
    return s + r.choice([".", "", "\n", "!", "?"])


def rand_cjk(r, n, chars, punct, extras=()):
    parts = []
    for _ in range(n):
        parts.append(r.choice(chars))
        if r.random() < 0.2:
            parts.append(r.choice(punct))
        if extras and r.random() < 0.05:
            parts.append(r.choice(extras))
    return "".join(parts)


def rand_chinese(r, n):
    return rand_cjk(r, n, CHINESE, CHINESE_PUNCT, [" ", "GPU", "2024年", "3.14", "AI", "\n"])


def rand_japanese(r, n):
    return rand_cjk(r, n, JAPANESE, JAPANESE_PUNCT)


def rand_code(r):
    t = r.choice(CODE)
    s = t.format(f=r.choice(IDENTS), F=r.choice(IDENTS).capitalize(), a=r.choice(IDENTS),
                 b=r.choice(IDENTS), n=r.randint(0, 100000))
    if r.random() < 0.3:
        s = s.replace("    ", "\t")
    if r.random() < 0.2:
        s = s.replace("\n", "\r\n")
    return s


def rand_emoji(r, n):
    parts = []
    for _ in range(n):
        parts.append(r.choice(EMOJI))
        x = r.random()
        if x < 0.3:
            parts.append(" ")
        elif x < 0.4:
            parts.append(r.choice(WORDS) + " ")
    return "".join(parts)


def digits(r, alphabet, lo, hi):
    return "".join(r.choice(alphabet) for _ in range(r.randint(lo, hi)))


# The forms of rand_number, one drawn uniformly.
NUMBER_FORMS = [
    lambda r: str(r.randint(0, 10 ** r.randint(1, 18))),
    lambda r: digits(r, "0123456789", 20, 300),
    lambda r: f"{r.uniform(-1e6, 1e6):.{r.randint(0, 9)}f}",
    lambda r: f"{r.randint(0, 10**9):,}",
    lambda r: f"+1 ({r.randint(100, 999)}) {r.randint(100, 999)}-{r.randint(1000, 9999)}",
    lambda r: f"{r.randint(1900, 2100)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:00Z",
    lambda r: f"0x{r.getrandbits(64):016X} 0b{r.getrandbits(16):b}",
    lambda r: f"{r.uniform(0, 10):.3e} {r.uniform(0, 1):.2E}",
    lambda r: digits(r, "０１２３４５６７８９", 1, 12),
    lambda r: digits(r, "٠١٢٣٤٥٦٧٨٩", 1, 12) + " " + digits(r, "०१२३४५६७८९", 1, 8),
    lambda r: f"v{r.randint(0, 9)}.{r.randint(0, 99)}.{r.randint(0, 999)} {r.randint(1, 99)}% ${r.randint(1, 9999)}.{r.randint(0, 99):02d} €{r.randint(1, 999)}",
    lambda r: " ".join(str(r.randint(-1000, 1000)) for _ in range(r.randint(2, 30))),
]


def rand_number(r):
    return NUMBER_FORMS[r.randint(0, len(NUMBER_FORMS) - 1)](r)


def rand_whitespace(r):
    parts = []
    for _ in range(r.randint(1, 10)):
        parts.append(r.choice(WHITESPACE) * r.randint(1, 6))
        if r.random() < 0.6:
            parts.append(r.choice(WORDS + ["x", "1", "!", "中", "😀", "-", "#"]))
    s = "".join(parts)
    if r.random() < 0.3:
        s = r.choice(WHITESPACE) * r.randint(1, 40) + s
    if r.random() < 0.3:
        s = s + r.choice(WHITESPACE) * r.randint(1, 40)
    return s


def rand_special(r):
    kind = r.randint(0, 4)
    if kind == 0:
        turns = []
        for _ in range(r.randint(1, 4)):
            role = r.choice(["system", "user", "assistant", "tool"])
            body = rand_prose(r, r.randint(3, 25)) if r.random() < 0.7 else rand_chinese(r, r.randint(2, 10))
            turns.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
        s = "".join(turns)
        if r.random() < 0.5:
            s += "<|im_start|>assistant\n" + r.choice(["", "<think>\n\n</think>\n\n", "<think>\nLet me think.\n</think>\n"])
        return s
    if kind == 1:
        return r.choice(WORDS) + r.choice(SPECIALS) + r.choice(WORDS) + r.choice([" ", "", "\n"]) + r.choice(SPECIALS)
    if kind == 2:
        return "".join(r.choice(SPECIALS + NEAR_SPECIALS + [" ", "\n", "a", "||", "<", ">"]) for _ in range(r.randint(1, 12)))
    if kind == 3:
        return f"<|fim_prefix|>{rand_code(r)}<|fim_suffix|>{rand_code(r)}<|fim_middle|>"
    return f"<tool_call>\n{{\"name\": \"{r.choice(IDENTS)}\", \"arguments\": {{\"q\": \"{r.choice(WORDS)}\"}}}}\n</tool_call><|endoftext|>"


def rand_nfd(r):
    words = [unicodedata.normalize("NFD", r.choice(NFD_SOURCES)) for _ in range(r.randint(1, 6))]
    if r.random() < 0.3:
        words.append(r.choice(NFD_SOURCES))  # composed next to decomposed
    return " ".join(words)


def rand_unusual(r):
    return "".join(r.choice(UNUSUAL + WORDS[:20] + [" ", "\n"]) for _ in range(r.randint(1, 8)))


def rand_long_word(r):
    kind = r.randint(0, 6)
    if kind == 0:
        return r.choice("abcxyz") * r.randint(100, 3000)
    if kind == 1:
        return r.choice(WORDS) * r.randint(20, 120)
    if kind == 2:
        return "https://example.com/" + "/".join(r.choice(IDENTS) for _ in range(r.randint(5, 40))) + "?q=" + "".join(
            r.choice("abcdef0123456789") for _ in range(r.randint(10, 200)))
    if kind == 3:
        return "".join(r.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(r.randint(100, 2000))) + "=="
    if kind == 4:
        return "".join(r.choice(CHINESE) for _ in range(r.randint(100, 600)))
    if kind == 5:
        return "-" * r.randint(10, 500) + "=" * r.randint(1, 300) + "!" * r.randint(1, 50)
    return " " * r.randint(100, 2000) + r.choice(WORDS)


def rand_other(r):
    return " ".join(r.choice(OTHER_SCRIPTS) for _ in range(r.randint(1, 4)))


GENERATORS = [
    ("prose", lambda r: rand_prose(r, r.randint(1, 80)), 340),
    ("chinese", lambda r: rand_chinese(r, r.randint(1, 60)), 200),
    ("japanese", lambda r: rand_japanese(r, r.randint(1, 40)), 140),
    ("other_scripts", rand_other, 110),
    ("code", rand_code, 230),
    ("emoji", lambda r: rand_emoji(r, r.randint(1, 20)), 150),
    ("numbers", rand_number, 170),
    ("whitespace", rand_whitespace, 170),
    ("special", rand_special, 170),
    ("nfd", rand_nfd, 90),
    ("unusual", rand_unusual, 130),
    ("long", rand_long_word, 40),
]


def rand_mixed(r):
    gens = [g for _, g, _ in GENERATORS if g is not rand_long_word]
    return r.choice(["", " ", "\n"]).join(r.choice(gens)(r) for _ in range(r.randint(2, 5)))


def fixed_strings():
    s = ["", " ", "  ", "\n", "\t", "a", "A", "0", "12345", "'s", "'", "''", "<|endoftext|>",
         "<|im_start|><|im_end|>", "Hello, world!", "hello world", " hello", "hello ", "\r\n\r\n",
         "  \n  ", "a  b", "a\n\nb", "1 2 3", "1,000,000", "3.14159", "I'm", " I'm", "Ġ", "Ċ"]
    # every printable-ish code point of a few interesting blocks, one string per block
    for lo, hi in [(0x20, 0x7F), (0xA0, 0x180), (0x300, 0x370), (0x370, 0x400), (0x2000, 0x2070),
                   (0x3000, 0x3100), (0xFF00, 0xFFF0), (0x1F300, 0x1F400)]:
        s.append("".join(chr(c) for c in range(lo, hi) if unicodedata.category(chr(c)) != "Cs"))
    s.extend(chr(c) for c in range(0, 0x80))  # each ASCII byte alone, controls included
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    r = random.Random(args.seed)
    strings = fixed_strings()
    for _, gen, count in GENERATORS:
        strings.extend(gen(r) for _ in range(count))
    strings.extend(rand_mixed(r) for _ in range(260))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(strings, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{len(strings)} strings, {sum(len(x.encode()) for x in strings)} bytes of UTF-8 -> {args.out}")


if __name__ == "__main__":
    main()
