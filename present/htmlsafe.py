"""Chart pages that no string of a trace can break out of.

vl-convert's HTML page embeds the Vega-Lite spec (and so every value of the
chart's data: run, job, layer type, process-group names ...) as raw JSON inside a
<script> element: a value holding `</script><script>...` would end that element
and run its own script when the page is opened. `vegalite_html` takes
vl-convert's page and writes the spec back as JSON in which `<`, `>`, `&` and
the line separators U+2028/U+2029 are escaped (\\u003c ...): the same value to
JavaScript, but no text that can close the script element or start a comment.
"""
import json
import re

_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")

# vl-convert's page: the spec on one line (JSON holds no raw newline) as `const spec = {...};`
_SPEC_LINE = re.compile(r"^([ \t]*const spec = )(.*);[ \t]*$", re.M)


def script_json(value):
    """JSON text of value that is safe inside a <script> element (and the same value)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _UNSAFE_RE.sub(lambda m: _UNSAFE[m[0]], text)


def vegalite_html(spec):
    """A self-contained HTML page of a Vega-Lite spec (JSON text or dict), the Vega
    runtime inlined (opens offline), its data escaped as script_json does."""
    import vl_convert as vlc
    text = spec if isinstance(spec, str) else json.dumps(spec, ensure_ascii=False)
    page = vlc.vegalite_to_html(text, bundle=True)
    found = list(_SPEC_LINE.finditer(page))
    if len(found) != 1:            # a vl-convert whose page we do not know: never write it raw
        raise ValueError("chart page: vl-convert's HTML has no single `const spec = ...;` line "
                         "(an unknown vl-convert version): write .svg or .png instead")
    m = found[0]
    json.loads(m[2])               # the whole line is the spec (ValueError if not)
    return page[:m.start(2)] + script_json(m[2]) + page[m.end(2):]


# U+2028/U+2029 in a value that Vega-Lite writes into a Vega expression (a sort
# order of names) end the expression ("Unexpected token ILLEGAL": no chart at all);
# a drawn chart shows them as a space. Both the raw characters and JSON's escape
# of them (an escape, not a backslash before 'u2028').
_SEPARATORS = re.compile(r"[\u2028\u2029]|(?<!\\)((?:\\\\)*)\\u202[89]")


def drawable(spec_text):
    """Vega-Lite JSON text with the line and paragraph separators in its strings as spaces."""
    return _SEPARATORS.sub(lambda m: (m[1] or "") + " ", spec_text)
