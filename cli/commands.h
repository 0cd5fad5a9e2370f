/* commands.h — one entry point per subcommand; argv[0] is the subcommand's name. */
#ifndef LLMRT_CLI_COMMANDS_H
#define LLMRT_CLI_COMMANDS_H

int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_plugins(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_logits(int argc, char **argv);

#endif
