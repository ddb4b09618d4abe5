import type { Command } from 'commander';

/** Each command path (`runs watch`) with the words that may follow it: its subcommands and options. */
function commandWords(program: Command): Map<string, string[]> {
  const words = new Map<string, string[]>();
  const visit = (command: Command, path: string) => {
    const options = command.options.map((option) => option.long).filter((long): long is string => Boolean(long));
    words.set(path, [...command.commands.map((sub) => sub.name()), ...options, '--json', '--help']);
    for (const sub of command.commands) visit(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  visit(program, '');
  return words;
}

/** A completion script for bash or zsh, from the program's own commands and options, so it never falls behind. */
export function completionScript(program: Command, shell: 'bash' | 'zsh'): string {
  const cases = [...commandWords(program)]
    .map(([path, words]) => `    "${path}") words="${[...new Set(words)].join(' ')}" ;;`)
    .join('\n');
  const body = `_rcp_complete() {
  local cur path word
  cur="\${COMP_WORDS[COMP_CWORD]}"
  path=""
  for word in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$word" in -*) ;; *) path="\${path:+$path }$word" ;; esac
  done
  local words=""
  case "$path" in
${cases}
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
`;
  const register = shell === 'zsh' ? 'autoload -U +X bashcompinit && bashcompinit\ncomplete -F _rcp_complete rcp\n' : 'complete -F _rcp_complete rcp\n';
  return `# rcp completion for ${shell}: eval "$(rcp completion ${shell})"\n${body}${register}`;
}
