// Unit-level parity: small templates exercising one construct each (expressions, filters,
// tests, whitespace control, loop variables, namespaces, macros, undefined behaviour), rendered
// by the C++ engine and by Python jinja2 and compared byte for byte. Where Python raises, the
// C++ engine must raise too.
#include <doctest/doctest.h>

#include "gateway/template/chat_template.h"
#include "shared/error.h"
#include "tests/template/reference.h"
#include "tests/test_util.h"

namespace {

struct Snippet {
  const char* source;
  const char* context;  // JSON object
};

const Snippet kSnippets[] = {
    // literals and printing with Python semantics
    {"{{ 1 }}|{{ -3 }}|{{ 1.5 }}|{{ 2.0 }}|{{ 1e20 }}|{{ 1.5e-7 }}|{{ 0.1 + 0.2 }}", "{}"},
    {"{{ true }}|{{ False }}|{{ none }}|{{ None }}|{{ 'a' 'b' }}", "{}"},
    {"{{ [1, 'a', none, true, 1.0] }}|{{ {'a': 1, 'b': [2]} }}|{{ (1,) }}|{{ (1, 'x') }}|{{ () }}",
     "{}"},
    {"{{ \"it's\" }}|{{ ['it\\'s', \"q\\\"\", 'tab\\t', 'nl\\n', 'bs\\\\'] }}", "{}"},
    {"{{ x }}|{{ x.y }}|{{ d.missing }}|{{ d['missing'] }}|{{ l[10] }}",
     "{\"d\": {\"a\": 1}, \"l\": [1]}"},
    {"{{ [1.5, 100.0, 1e16, 123456789.123, -0.0, 1e-5, 0.0001] }}", "{}"},
    // arithmetic
    {"{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7 / 2 }}|{{ 6 / 3 }}|{{ "
     "2 ** 10 }}|{{ 2 ** -1 }}|{{ -2 ** 2 }}",
     "{}"},
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ 'a' ~ 1 ~ none ~ true "
     "}}|{{ 1.5 // 1 }}|{{ 7.5 % 2 }}",
     "{}"},
    {"{{ 'a' + 1 }}", "{}"},
    {"{{ 1 / 0 }}", "{}"},
    {"{{ [1, 2] + [3] }}|{{ (1,) + (2,) }}|{{ true + 1 }}|{{ 3 - 1.5 }}", "{}"},
    // comparisons and logic
    {"{{ 1 == 1.0 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ true "
     "== 1 }}|{{ none == none }}",
     "{}"},
    {"{{ 1 and 2 }}|{{ 0 and 2 }}|{{ 0 or 'x' }}|{{ '' or [] }}|{{ not 0 }}|{{ not [] }}|{{ x or "
     "'dflt' }}",
     "{}"},
    {"{{ 'b' in 'abc' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 'z' not in 'abc' }}|{{ 3 not "
     "in [1] }}",
     "{}"},
    {"{{ 'x' if true else 'y' }}|{{ 'x' if false else 'y' }}|{{ 'x' if false }}|{{ 1 if none is "
     "none else 2 }}",
     "{}"},
    {"{{ 1 < 'a' }}", "{}"},
    // attribute / item / slices
    {"{{ d.a }}|{{ d['a'] }}|{{ l[0] }}|{{ l[-1] }}|{{ l.0 }}|{{ s[1] }}|{{ s[-1] }}",
     "{\"d\": {\"a\": 5}, \"l\": [1, 2, 3], \"s\": \"héllo\"}"},
    {"{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ l[-2:] }}|{{ s[::-1] }}|{{ s[1:3] "
     "}}|{{ l[5:] }}|{{ l[3:1:-1] }}",
     "{\"l\": [1, 2, 3, 4, 5], \"s\": \"héllo wörld\"}"},
    {"{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 7) }}|{{ d.keys() | list }}|{{ d.values() "
     "| list }}|{{ d.items() | list }}",
     "{\"d\": {\"a\": 1, \"b\": \"x\"}}"},
    // string methods
    {"{{ '  x  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ ' hi "
     "'.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) "
     "}}|{{ 'a,b,c'.rsplit(',', 1) }}",
     "{}"},
    {"{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() "
     "}}|{{ 'hELLO'.capitalize() }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'aXbX'.replace('X', "
     "'-') }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.rfind('b') }}|{{ 'abcb'.count('b') }}",
     "{}"},
    {"{{ '-'.join(['a', 'b']) }}|{{ 'x{}y{}'.format(1, 'z') }}|{{ 'a\\nb\\r\\nc'.splitlines() "
     "}}|{{ '123'.isdigit() }}|{{ 'ab1'.isalpha() }}|{{ 'ab'.islower() }}|{{ 'a=b'.partition('=') "
     "}}",
     "{}"},
    // Unicode case mapping and classes beyond Latin-1 (full mappings, final sigma)
    {"{{ 'straße'.upper() }}|{{ 'ﬁne ﬂour'.upper() }}|{{ 'ﬁne'.title() }}|{{ 'ßa'.capitalize() "
     "}}|{{ 'İstanbul'.lower() }}|{{ 'ıi'.upper() }}|{{ 'ΟΔΟΣ ΣΟΦΟΣ.'.lower() }}|{{ "
     "'ΣΑΣ'.lower() }}|{{ 'Σ'.lower() }}|{{ 'ᾈ'.lower() }}",
     "{}"},
    {"{{ 'Բարև'.upper() }}|{{ 'ԲԱՐԵՎ'.lower() }}|{{ 'եւ և'.upper() }}|{{ 'ﬓ'.title() }}|{{ "
     "'ქართული'.upper() }}|{{ 'ᲥᲐᲠᲗᲣᲚᲘ'.lower() }}|{{ 'ქართ ენა'.title() }}|{{ "
     "'ᏣᎳᎩ'.lower() "
     "}}|{{ 'ꮳꮃꭹ'.upper() }}|{{ 'ǆemal'.title() }}|{{ 'ǅ'.upper() }}",
     "{}"},
    {"{{ 'привет мир'.title() }}|{{ 'ΑΒΓ'.isupper() }}|{{ 'αβγ'.islower() }}|{{ 'ǅa'.islower() "
     "}}|{{ 'ⅰⅱ'.upper() }}|{{ 'Ⓐ'.lower() }}|{{ 'ⓐ'.isupper() }}|{{ 'äöü'.isalpha() }}|{{ "
     "'٣٤'.isdigit() }}|{{ '²'.isdigit() }}|{{ '½'.isdigit() }}|{{ '×'.isalpha() }}|{{ "
     "'\u3000\u2028\x1c'.isspace() }}|{{ '\u200b'.isspace() }}|{{ 'a\u00a0b'.split() }}",
     "{}"},
    {"{{ s.upper() }}|{{ s.lower() }}|{{ s.title() }}|{{ s | upper }}|{{ s | title }}|{{ s | "
     "capitalize }}|{{ s | length }}|{{ s | list | length }}|{{ s[2:5] }}|{{ s | wordcount }}",
     "{\"s\": \"ǉubljana ΣΊΣΥΦΟΣ ß ﬃ Ꭰ ꭰ ᲐᲑ\"}"},
    // filters
    {"{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x | tojson(sort_keys=true) }}|{{ x | "
     "tojson(separators=(',', ':')) }}",
     "{\"x\": {\"b\": [1, 2.5, null, true], \"a\": \"é\\\"<>&\\u0001\", \"c\": {}}}"},
    {"{{ 'é' | tojson(ensure_ascii=true) }}|{{ '🎉' | tojson(ensure_ascii=true) }}|{{ [] | "
     "tojson(indent=4) }}|{{ 'x' | tojson(indent='\\t') }}|{{ [[1], {'a': [1, {}]}] | "
     "tojson(indent=0) }}",
     "{}"},
    {"{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ [1, 2] | length }}|{{ 'héllo' | count "
     "}}|{{ {'a': 1} | length }}|{{ x | length }}",
     "{}"},
    {"{{ [3, 1, 2] | first }}|{{ [3, 1, 2] | last }}|{{ 'abc' | first }}|{{ [] | first }}|{{ [1, "
     "2] | join(', ') }}|{{ [{'n': 'a'}, {'n': 'b'}] | join('/', attribute='n') }}",
     "{}"},
    {"{{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | "
     "d('n', boolean=true) }}|{{ 0 | default(5) }}",
     "{}"},
    {"{{ 'a-b-c' | replace('-', '+') }}|{{ 'a-b-c' | replace('-', '+', 1) }}|{{ 'hello world-x(y' "
     "| title }}|{{ 'hELLO' | capitalize }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}",
     "{}"},
    {"{{ 5 | string }}|{{ [1] | string }}|{{ '42' | int }}|{{ '4.7' | int }}|{{ 'x' | int }}|{{ "
     "'x' | int(7) }}|{{ 3.9 | int }}|{{ '2.5' | float }}|{{ 'q' | float }}|{{ true | int }}",
     "{}"},
    {"{{ 'abc' | list }}|{{ {'a': 1, 'b': 2} | list }}|{{ l | map(attribute='n') | list }}|{{ "
     "['a', 'b'] | map('upper') | list }}|{{ l | map(attribute='zz', default='?') | join }}",
     "{\"l\": [{\"n\": 1}, {\"n\": 2}]}"},
    {"{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('even') | list }}|{{ [0, "
     "1, '', 'a'] | select | list }}|{{ l | selectattr('r', 'equalto', 'u') | list }}|{{ l | "
     "rejectattr('r', 'eq', 'u') | map(attribute='r') | list }}|{{ l | selectattr('t') | list }}",
     "{\"l\": [{\"r\": \"u\", \"t\": true}, {\"r\": \"a\"}, {\"r\": \"u\"}]}"},
    {"{{ ['a', 'A', 'b', 'a'] | unique | list }}|{{ ['a', 'A'] | unique(case_sensitive=true) | "
     "list }}|{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort }}|{{ [3, 1, 2] | "
     "sort(reverse=true) }}|{{ l | sort(attribute='n') | map(attribute='n') | list }}",
     "{\"l\": [{\"n\": 2}, {\"n\": 1}]}"},
    {"{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(2, "
     "blank=true) }}|{{ 'x\\ny' | indent('> ') }}",
     "{}"},
    {"{{ -3 | abs }}|{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 2.675 | round(2) }}|{{ 2.1 | round(0, "
     "'ceil') }}|{{ 2.9 | round(method='floor') }}|{{ [1, 2, 3] | sum }}|{{ [1, 5, 3] | max }}|{{ "
     "['b', 'a'] | min }}|{{ [] | max }}",
     "{}"},
    {"{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(by='value') }}|{{ [1, 2, 3, "
     "4, 5] | batch(2) | list }}|{{ [1, 2, 3] | batch(2, 0) | list }}|{{ 'one two, three' | "
     "wordcount }}|{{ 'ab' | center(6) }}|[{{ 'abc' | center(6) }}]",
     "{}"},
    {"{{ '<a href=\"x\">&\\'</a>' | e }}|{{ '<b>x</b>  y' | striptags }}|{{ 'x' | safe }}|{{ [1, "
     "2] | reverse | list }}|{{ 'abc' | reverse }}|{{ {'a': 1} | items | list }}|{{ x | items | "
     "list }}",
     "{}"},
    {"{{ x | tojson }}", "{}"},
    {"{{ '%s=%d' | format('a', 3) }}|{{ d | attr('a') }}", "{\"d\": {\"a\": 9}}"},
    // tests
    {"{{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 'a' is string }}|{{ {} is "
     "mapping }}|{{ [] is mapping }}|{{ [] is iterable }}|{{ 'a' is iterable }}|{{ 1 is iterable "
     "}}|{{ x is iterable }}",
     "{}"},
    {"{{ 1 is number }}|{{ true is number }}|{{ 1 is integer }}|{{ true is integer }}|{{ 1.0 is "
     "float }}|{{ true is boolean }}|{{ true is true }}|{{ 1 is true }}|{{ false is false }}|{{ "
     "range is callable }}|{{ 'x' is callable }}",
     "{}"},
    {"{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 9 is divisibleby(4) }}|{{ 'a' is "
     "equalto 'a' }}|{{ 2 is eq 2 }}|{{ 'a' is in 'cat' }}|{{ 'ab' is lower }}|{{ 'AB' is upper "
     "}}|{{ 'x' is not string }}|{{ [] is sequence }}|{{ none is sameas none }}",
     "{}"},
    {"{{ 1 is nonexistenttest }}", "{}"},
    {"{{ 1 | nonexistentfilter }}", "{}"},
    // whitespace control, trim_blocks, lstrip_blocks
    {"<ul>\n  {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n", "{}"},
    {"a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e {# comment #}\nf\n  {#- c2 -#}  g",
     "{}"},
    {"x\n    {% if true %}\ny\n    {%+ if true %}z{% endif %}\n{% endif +%}\nw\n", "{}"},
    {"{% raw %}{{ not rendered }}{% endraw %}|  {% raw -%}  a {%- endraw %}|{{ '{{' }}", "{}"},
    {"line1\n{{ 'v' }}\n  {{ 'w' }}  \n{% set a = 1 %}\n  text\n{% if a %}yes{% endif %}\n\n",
     "{}"},
    {"\t{% if true %}\n\tx\n\t{% endif %}\r\nend\r\n", "{}"},
    // loops
    {"{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ "
     "loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "{\"l\": [\"a\", \"b\", \"c\"]}"},
    {"{% for x in l %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}]{% endfor %}{% for x in [] "
     "%}no{% else %}empty{% endfor %}",
     "{\"l\": [1, 2, 3]}"},
    {"{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{% if loop.last %}!{% endif %} {% "
     "endfor %}",
     "{}"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% "
     "endfor %}{% for k in d %}{{ k }}{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% "
     "endfor %}",
     "{\"d\": {\"z\": 1, \"a\": 2}}"},
    {"{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% "
     "endif %}{{ x }}{% endfor %}|{% for c in 'abc' | reverse %}{{ c }}{{ loop.cycle('+', '-') "
     "}}{% endfor %}",
     "{}"},
    {"{% for x in l | sort %}{{ x }}{% endfor %}|{% for x in range(1, 10, 3) %}{{ x }}{% endfor "
     "%}|{% for x in range(3, 0, -1) %}{{ x }}{% endfor %}|{% for x in x %}u{% endfor %}",
     "{\"l\": [3, 1, 2]}"},
    {"{% for o in [1, 2] %}{% for i in [3, 4] %}{{ o }}{{ i }}{{ loop.index }}{% endfor %}{{ "
     "loop.index }} {% endfor %}",
     "{}"},
    // scoping and namespace
    {"{% set c = 0 %}{% for x in [1, 2] %}{% set c = c + x %}{{ c }}{% endfor %}|{{ c }}", "{}"},
    {"{% set ns = namespace(c=0, items=[]) %}{% for x in [1, 2, 3] %}{% set ns.c = ns.c + x %}{% "
     "set ns.items = ns.items + [x] %}{% endfor %}{{ ns.c }}|{{ ns.items }}",
     "{}"},
    {"{% if true %}{% set a = 'in-if' %}{% endif %}{{ a }}|{% set x, y = 1, 2 %}{{ x }}{{ y }}|{% "
     "set b %}block {{ 1 + 1 }}{% endset %}[{{ b }}]|{% set u | upper %}up{% endset %}{{ u }}",
     "{}"},
    {"{% set ns = namespace() %}{% set ns.v = 'set' %}{{ ns.v }}|{% set d = dict(a=1, b='x') %}{{ "
     "d }}|{% set n2 = namespace({'k': 1}, j=2) %}{{ n2.k }}{{ n2.j }}",
     "{}"},
    {"{% set x = 1 %}{% set x.y = 2 %}", "{}"},
    {"{% with a = 5 %}{{ a }}{% endwith %}|{{ a }}", "{}"},
    // macros
    {"{% macro m(a, b='B', c=none) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) "
     "}}{{ m(1, c=3) }}{{ m(a='k') }}{{ m() }}",
     "{}"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% "
     "endmacro %}{{ fact(5) }}",
     "{}"},
    {"{% set g = 'outer' %}{% macro show() %}{{ g }}{% endmacro %}{{ show() }}{% set g = 'changed' "
     "%}{{ show() }}",
     "{}"},
    {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') "
     "%}inside {{ 1 }}{% endcall %}",
     "{}"},
    {"{%- macro t(x) -%}\n  {{ x }}\n{%- endmacro -%}\n{{ t('a') }}{{ t('b') | length }}", "{}"},
    {"{% filter upper %}shout {{ 'x' }}{% endfilter %}", "{}"},
    // globals
    {"{{ range(3) | list }}|{{ raise_exception is defined }}|{{ strftime_now is defined }}", "{}"},
    {"{{ raise_exception('custom failure') }}", "{}"},
    // undefined behaviour
    {"[{{ u }}]{{ u | length }}{% for x in u %}x{% endfor %}{{ u is defined }}{{ u == u }}{{ not u "
     "}}",
     "{}"},
    {"{{ u.attr }}", "{}"},
    {"{{ d.missing.attr }}", "{\"d\": {}}"},
    {"{{ u + 1 }}", "{}"},
    {"{{ u() }}", "{}"},
    {"{{ d.missing is defined }}|{{ d.missing | default('dflt') }}|{{ d['a'] is defined }}",
     "{\"d\": {\"a\": null}}"},
    {"{{ [1, 2].append(3) }}", "{}"},
    {"{{ 'abc'.nosuchmethod() }}", "{}"},
};

}  // namespace

TEST_CASE("template constructs match Python jinja2") {
  std::string dir = m3::test::TempDir();
  std::vector<m3::test::ReferenceCase> cases;
  size_t i = 0;
  for (const auto& s : kSnippets) {
    std::string path = dir + "/snippet" + std::to_string(i++) + ".jinja";
    m3::test::WriteFile(path, s.source);
    cases.push_back({path, nlohmann::ordered_json::parse(s.context)});
  }
  auto reference = m3::test::RenderWithPython(cases);
  int equal = 0, raised = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    std::string source = kSnippets[k].source;
    CAPTURE(source);
    std::string got, error;
    bool ok = true;
    try {
      got = m3::tmpl::ChatTemplate::Parse(kSnippets[k].source, "snippet")
                .Render(nlohmann::ordered_json::parse(kSnippets[k].context));
    } catch (const m3::Error& e) {
      ok = false;
      error = e.what();
    }
    if (reference[k].ok) {
      CAPTURE(error);
      CHECK(ok);
      CHECK(got == reference[k].output);
      if (ok && got == reference[k].output) ++equal;
    } else {
      CAPTURE(reference[k].error);
      CAPTURE(got);
      CHECK_MESSAGE(!ok, "C++ rendered where Python raised");
      if (!ok) ++raised;
    }
  }
  MESSAGE(equal << " snippets byte-equal, " << raised << " raised in both, of " << cases.size());
}
