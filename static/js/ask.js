// Ask: the chosen database and strategy are named in large type above the form; keep the names in step with
// the selects, so what is shown is always what will be asked.
document.addEventListener("DOMContentLoaded", () => {
  const pairs = [["id_database", "ask-database-name", "ask-database-source"], ["id_strategy", "ask-strategy-name", null]];
  for (const [selectId, nameId, sourceId] of pairs) {
    const select = document.getElementById(selectId);
    const name = document.getElementById(nameId);
    if (!select || !name) continue;
    select.addEventListener("change", () => {
      name.textContent = select.options[select.selectedIndex].text;
      const source = sourceId && document.getElementById(sourceId);
      if (source) source.textContent = "as chosen";
    });
  }
});
