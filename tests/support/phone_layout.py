"""A page in a real browser fits its screen: nothing sideways beyond its width."""

# The widest visible element's right edge with `overflow-x: clip` lifted from html and body;
# elements inside a container that scrolls sideways by itself count at the container's edge.
WIDEST = """() => {
  for (const el of [document.documentElement, document.body]) el.style.overflowX = 'visible';
  const scrolls = el => { const s = getComputedStyle(el).overflowX; return s === 'auto' || s === 'scroll'; };
  let widest = 0, culprit = '';
  for (const el of document.body.querySelectorAll('*')) {
    if (getComputedStyle(el).visibility === 'hidden') continue;
    let up = el, inside = false;
    while (up && up !== document.body) {   // hidden (a tooltip at rest) or scrolling by itself
      if ((up !== el && scrolls(up)) || getComputedStyle(up).opacity === '0') { inside = true; break; }
      up = up.parentElement;
    }
    if (inside) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > widest) { widest = r.right; culprit = el.tagName + '.' + el.className + ' "' + (el.textContent || '').trim().slice(0, 40) + '" in ' + el.parentElement.tagName + '.' + el.parentElement.className; }
  }
  for (const el of [document.documentElement, document.body]) el.style.overflowX = '';
  return [widest, culprit];
}"""


def assert_fits(page, name: str, width: int = 390) -> None:
    widest, culprit = page.evaluate(WIDEST)
    assert widest <= width + 1, f"{name}: {culprit} reaches {widest:.0f} px"
