# bash completion for llmrt: subcommands, and each subcommand's options as its --help lists
# them (so it never falls behind the binary); files and folders for the options that take
# them, model folders for `llmrt serve`.
_llmrt()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} exe=${COMP_WORDS[0]}
    if (( COMP_CWORD == 1 )); then
        local cmds
        cmds=$("$exe" --help 2>/dev/null | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
        COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
        return
    fi
    local cmd=${COMP_WORDS[1]}
    case $prev in
        --model|--tokenizer|--inspect|--csv|-o|--output)
            COMPREPLY=($(compgen -d -- "$cur")); return ;;
        -c|--config|--prompts-file|--file|--chat|--out|--json|--plot|--bench)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --set)
            local keys
            keys=$("$exe" config 2>/dev/null | awk '/^\[/ { gsub(/[][]/, ""); s = $1; next } / = / { print s "." $1 "=" }')
            compopt -o nospace 2>/dev/null
            COMPREPLY=($(compgen -W "$keys" -- "$cur")); return ;;
    esac
    if [[ $cur == -* ]]; then
        local opts
        opts=$("$exe" "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $cmd == serve ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _llmrt llmrt
